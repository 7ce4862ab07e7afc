package ipxe_test

import (
	"bytes"
	"os"
	"os/exec"
	"os/signal"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/drivers/ipxe"
)

// The emulated NIC in a child process (this test binary again), the driver here: registers,
// write queue and DMA memory in memfds mapped by both, interrupts and doorbells over eventfds.
// The child's wire is a loopback plug, so every frame sent comes back; its counters live in a
// fifth memfd, so the parent reads what the device counted. SIGUSR1 pulls the cable, SIGUSR2
// plugs it back in.

const childEnv = "NICSTACK_INTEL_CHILD"

// counterPage is the size of the shared counters' memfd: a slot of 8 bytes per counter.
const counterPage = 4096

func mapShared(tb testing.TB, fd, size int) []byte {
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		tb.Fatal(err)
	}
	return mem
}

// sharedCounters are the device's counters in shared memory: slots in the order
// intel.NewCounters asks for them, the same in both processes.
func sharedCounters(mem []byte) *intel.Counters {
	next := 0
	return intel.NewCounters(func(string) *atomic.Uint64 {
		c := (*atomic.Uint64)(unsafe.Pointer(&mem[next*8]))
		next++
		return c
	})
}

// loopback is a wire plugged back into its own device.
type loopback struct{ dev *intel.Device }

func (l *loopback) Transmit(frames [][]byte) {
	for len(frames) > 0 {
		frames = frames[l.dev.Receive(frames):]
		if len(frames) > 0 {
			time.Sleep(l.dev.ReceiveWait())
		}
	}
}

// TestEmulatedNICChild is the child's body; it does nothing in a normal test run.
func TestEmulatedNICChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs as the child of the tests across processes")
	}
	mmio := mapShared(t, 3, regs.RegisterPageSize+regs.WriteQueueSize)
	dma := mapShared(t, 4, ipxe.DMASize)
	irq, doorbell := regs.Eventfd(5), regs.Eventfd(6)
	cnt := sharedCounters(mapShared(t, 7, counterPage))
	q, err := regs.NewWriteQueue(mmio[regs.RegisterPageSize:])
	if err != nil {
		t.Fatal(err)
	}
	wire := &loopback{}
	dev, err := intel.New(mmio[:regs.RegisterPageSize], dma, intel.DeviceConfig{
		MAC: nicMAC, IRQ: irq, Wire: wire, Posted: q, Autoneg: time.Millisecond, Counters: cnt,
	})
	if err != nil {
		t.Fatal(err)
	}
	wire.dev = dev
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for s := range sig {
			dev.SetCarrier(s == syscall.SIGUSR2)
		}
	}()
	go func() {
		for doorbell.Wait() == nil {
			dev.Kick()
		}
	}()
	dev.Run(nil) // until the parent kills us
}

// child is the emulated NIC's process and the driver's view of it.
type child struct {
	t    *testing.T
	cmd  *exec.Cmd
	regs *regs.PostedRegisters
	dma  []byte
	irq  regs.Eventfd
	cnt  *intel.Counters // the device's, in shared memory
}

// startChild starts the emulated NIC in a child process; it is killed when the test ends.
func startChild(t *testing.T) *child {
	memfd := func(name string, size int) *os.File {
		fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			t.Fatal(err)
		}
		return os.NewFile(uintptr(fd), name)
	}
	eventfd := func(name string) *os.File {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		return os.NewFile(uintptr(fd), name)
	}
	files := []*os.File{
		memfd("intel-regs", regs.RegisterPageSize+regs.WriteQueueSize),
		memfd("intel-dma", ipxe.DMASize),
		eventfd("intel-irq"), eventfd("intel-doorbell"),
		memfd("intel-counters", counterPage),
	}
	t.Cleanup(func() {
		for _, f := range files {
			f.Close()
		}
	})
	c := &child{t: t}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestEmulatedNICChild$")
	c.cmd.Env = append(os.Environ(), childEnv+"=1")
	c.cmd.ExtraFiles = files
	c.cmd.Stderr = os.Stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
	regsMem := mapShared(t, int(files[0].Fd()), regs.RegisterPageSize+regs.WriteQueueSize)
	c.dma = mapShared(t, int(files[1].Fd()), ipxe.DMASize)
	cntMem := mapShared(t, int(files[4].Fd()), counterPage)
	t.Cleanup(func() {
		unix.Munmap(regsMem)
		unix.Munmap(c.dma)
		unix.Munmap(cntMem)
	})
	c.cnt = sharedCounters(cntMem)
	c.irq = regs.Eventfd(int(files[2].Fd()))
	doorbell := regs.Eventfd(int(files[3].Fd()))
	q, err := regs.NewWriteQueue(regsMem[regs.RegisterPageSize:])
	if err != nil {
		t.Fatal(err)
	}
	if c.regs, err = regs.NewPostedRegisters(regsMem[:regs.RegisterPageSize], q, doorbell.Raise); err != nil {
		t.Fatal(err)
	}
	unix.SetNonblock(int(files[2].Fd()), true)
	return c
}

// open opens the driver on the child's device.
func (c *child) open(cfg ipxe.Config, onLink ipxe.LinkFunc) *ipxe.Driver {
	drv, err := ipxe.Open(ipxe.Device{Regs: c.regs, DMA: c.dma, DeviceID: 0x10D3}, cfg, onLink)
	if err != nil {
		c.t.Fatal(err)
	}
	return drv
}

// service runs the interrupt handler if the line was raised, or sleeps a little.
func (c *child) service(drv *ipxe.Driver) {
	if c.irq.Wait() != nil {
		time.Sleep(100 * time.Microsecond) // no interrupt yet
	}
	drv.HandleInterrupt()
}

// waitFor services the device until cond holds, for up to 20 s.
func (c *child) waitFor(drv *ipxe.Driver, what string, cond func() bool) {
	c.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); c.service(drv) {
		if time.Now().After(deadline) {
			c.t.Fatalf("waited 20 s for %s", what)
		}
	}
}

// TestAcrossProcesses sends 1000 frames of all sizes round the loop, four times round both
// rings.
func TestAcrossProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	c := startChild(t)
	drv := c.open(ipxe.DefaultConfig(), nil)
	var out [][]byte
	for i := range 1000 {
		out = append(out, frame(nicMAC, 60+i%1455, i))
	}
	up := &fakeUplink{}
	c.waitFor(drv, "link up", func() bool { up, _ := drv.Link(); return up })
	drv.SetUplink(up)
	sent := 0
	c.waitFor(drv, "the frames back", func() bool {
		if len(up.tx) == 0 && len(up.rx) == sent && sent < len(out) { // batches the RX ring holds
			next := min(sent+100, len(out))
			up.tx, sent = out[sent:next], next
		}
		drv.Transmit()
		return len(up.rx) >= len(out)
	})
	sameFrames(t, "looped back", up.rx, out)
	if !bytes.Equal(drv.MAC(), nicMAC) {
		t.Errorf("MAC %v from RAL/RAH across processes", drv.MAC())
	}
	// the rings wrapped: every frame took one descriptor each way
	if tx, rx := c.cnt.TXDescriptors.Load(), c.cnt.RXDescriptors.Load(); tx != 1000 || rx != 1000 {
		t.Errorf("device used %d TX and %d RX descriptors, want 1000 each (ring of %d)", tx, rx, ipxe.RingSize)
	}
	if n := c.cnt.RXNoDescriptor.Load() + c.cnt.BadDescriptors.Load() + c.cnt.TXDropped.Load(); n != 0 {
		t.Errorf("device dropped %d frames or descriptors", n)
	}
}

// TestRXOverrunAcrossProcesses: the driver sends more frames than the RX ring holds round the
// loop without servicing its RX ring; the device fills the free descriptors (all but one),
// drops the rest and counts them, and
// the frames taken reach the router intact and in order. Then the ring works again.
func TestRXOverrunAcrossProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	c := startChild(t)
	cfg := ipxe.DefaultConfig()
	cfg.RxPollOnTx = false // Transmit leaves the RX ring alone too
	drv := c.open(cfg, nil)
	up := &fakeUplink{}
	c.waitFor(drv, "link up", func() bool { up, _ := drv.Link(); return up })
	drv.SetUplink(up)
	const frames = ipxe.RingSize + 144
	var out [][]byte
	for i := range frames {
		out = append(out, frame(nicMAC, 64+i*3%1450, i))
	}
	up.tx = out
	// transmit only: Transmit reaps the TX ring itself, nothing takes the RX ring
	for deadline := time.Now().Add(20 * time.Second); c.cnt.RXFrames.Load()+c.cnt.RXNoDescriptor.Load() < frames; {
		if time.Now().After(deadline) {
			t.Fatalf("device took %d frames and dropped %d in 20 s, want %d in all", c.cnt.RXFrames.Load(), c.cnt.RXNoDescriptor.Load(), frames)
		}
		drv.Transmit()
		time.Sleep(100 * time.Microsecond)
	}
	const free = ipxe.RingSize - 1
	if got, dropped := c.cnt.RXFrames.Load(), c.cnt.RXNoDescriptor.Load(); got != free || dropped != frames-free {
		t.Errorf("device took %d frames and dropped %d for want of descriptors, want %d and %d", got, dropped, free, frames-free)
	}
	if len(up.rx) != 0 {
		t.Fatalf("%d frames reached the router before the driver serviced the ring", len(up.rx))
	}
	drv.HandleInterrupt()
	sameFrames(t, "after the overrun", up.rx, out[:free])
	if n := drv.Counters().RXDropped.Load(); n != 0 {
		t.Errorf("driver dropped %d frames (bad descriptors)", n)
	}
	more := [][]byte{frame(nicMAC, 100, 1000), frame(nicMAC, 1514, 1001)}
	up.tx = append(up.tx, more...)
	drv.Transmit()
	c.waitFor(drv, "frames after the overrun", func() bool { return len(up.rx) >= free+len(more) })
	sameFrames(t, "after the overrun", up.rx[free:], more)
}

// TestLinkDownAcrossProcesses pulls the cable while frames flow: the driver hears the link go
// down (the component closes the Uplink session) and up again, and frames flow again intact.
func TestLinkDownAcrossProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	c := startChild(t)
	up := &fakeUplink{}
	var drv *ipxe.Driver
	var links []bool
	onLink := func(linkUp bool, _ int) { // the component's rule: a session exactly while the link is up
		links = append(links, linkUp)
		if linkUp {
			drv.SetUplink(up)
		} else {
			drv.SetUplink(nil)
		}
	}
	drv = c.open(ipxe.DefaultConfig(), onLink)
	if linkUp, speed := drv.Link(); linkUp {
		onLink(linkUp, speed)
	}
	c.waitFor(drv, "link up", func() bool { return len(links) == 1 })
	seq := 0
	keepSending := func() {
		for len(up.tx) < 64 && seq < 1<<16 { // frame numbers the frame in 16 bits
			up.tx = append(up.tx, frame(nicMAC, 1514, seq))
			seq++
		}
		drv.Transmit()
	}
	c.waitFor(drv, "frames both ways", func() bool { keepSending(); return len(up.rx) >= 300 })
	if err := c.cmd.Process.Signal(syscall.SIGUSR1); err != nil { // pull the cable
		t.Fatal(err)
	}
	c.waitFor(drv, "link down", func() bool { keepSending(); return len(links) == 2 })
	if links[1] {
		t.Fatalf("link changes %v, want up then down", links)
	}
	before := len(up.rx)
	time.Sleep(20 * time.Millisecond)
	c.service(drv)
	drv.Transmit() // no session: nothing is taken
	if len(up.rx) != before {
		t.Errorf("%d frames reached the closed session", len(up.rx)-before)
	}
	if err := c.cmd.Process.Signal(syscall.SIGUSR2); err != nil { // plug it back in
		t.Fatal(err)
	}
	c.waitFor(drv, "link up again", func() bool { return len(links) == 3 })
	c.waitFor(drv, "frames again", func() bool { keepSending(); return len(up.rx) >= before+300 })
	// every frame that came back is whole, in the order sent (frames lost on the wire while
	// the cable was out leave gaps)
	last := -1
	for i, f := range up.rx {
		n := int(f[14])<<8 | int(f[15])
		if !bytes.Equal(f, frame(nicMAC, 1514, n)) || n <= last {
			t.Fatalf("frame %d (seq %d after %d) corrupt or out of order", i, n, last)
		}
		last = n
	}
	if links[2] != true {
		t.Errorf("link changes %v, want up, down, up", links)
	}
}
