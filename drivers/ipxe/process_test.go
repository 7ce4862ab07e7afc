package ipxe_test

import (
	"bytes"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/ipxe"
)

// The emulated NIC in a child process (this test binary again), the driver here: registers,
// write queue and DMA memory in memfds mapped by both, interrupts and doorbells over eventfds.
// The child's wire is a loopback plug, so every frame sent comes back.

const childEnv = "NICSTACK_INTEL_CHILD"

func mapShared(tb testing.TB, fd, size int) []byte {
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		tb.Fatal(err)
	}
	return mem
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
		t.Skip("runs as the child of TestAcrossProcesses")
	}
	regs := mapShared(t, 3, intel.RegisterPageSize+intel.WriteQueueSize)
	dma := mapShared(t, 4, ipxe.DMASize)
	irq, doorbell := intel.Eventfd(5), intel.Eventfd(6)
	q, err := intel.NewWriteQueue(regs[intel.RegisterPageSize:])
	if err != nil {
		t.Fatal(err)
	}
	wire := &loopback{}
	dev, err := intel.New(regs[:intel.RegisterPageSize], dma, intel.Config{
		MAC: nicMAC, IRQ: irq, Wire: wire, Posted: q, Autoneg: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	wire.dev = dev
	go func() {
		for doorbell.Wait() == nil {
			dev.Kick()
		}
	}()
	dev.Run(nil) // until the parent kills us
}

func TestAcrossProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
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
		memfd("intel-regs", intel.RegisterPageSize+intel.WriteQueueSize),
		memfd("intel-dma", ipxe.DMASize),
		eventfd("intel-irq"), eventfd("intel-doorbell"),
	}
	for _, f := range files {
		defer f.Close()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEmulatedNICChild$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.ExtraFiles = files
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()

	regsMem := mapShared(t, int(files[0].Fd()), intel.RegisterPageSize+intel.WriteQueueSize)
	defer unix.Munmap(regsMem)
	dma := mapShared(t, int(files[1].Fd()), ipxe.DMASize)
	defer unix.Munmap(dma)
	irq, doorbell := intel.Eventfd(int(files[2].Fd())), intel.Eventfd(int(files[3].Fd()))
	q, err := intel.NewWriteQueue(regsMem[intel.RegisterPageSize:])
	if err != nil {
		t.Fatal(err)
	}
	regs, err := intel.NewPostedRegisters(regsMem[:intel.RegisterPageSize], q, doorbell.Raise)
	if err != nil {
		t.Fatal(err)
	}
	drv, err := ipxe.Open(ipxe.Device{Regs: regs, DMA: dma, DeviceID: 0x10D3}, ipxe.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for i := range 1000 {
		out = append(out, frame(nicMAC, 60+i%1455, i))
	}
	up := &fakeUplink{}
	unix.SetNonblock(int(files[2].Fd()), true)
	deadline := time.Now().Add(20 * time.Second)
	opened, sent := false, 0
	for len(up.rx) < len(out) && time.Now().Before(deadline) {
		if irq.Wait() != nil {
			time.Sleep(100 * time.Microsecond) // no interrupt yet
		}
		drv.HandleInterrupt()
		if linkUp, _ := drv.Link(); linkUp && !opened {
			opened = true
			drv.SetUplink(up)
		}
		if len(up.tx) == 0 && len(up.rx) == sent && sent < len(out) { // batches the RX ring holds
			next := min(sent+100, len(out))
			up.tx, sent = out[sent:next], next
		}
		drv.Transmit()
	}
	if !opened {
		t.Fatal("link did not come up")
	}
	sameFrames(t, "looped back", up.rx, out)
	if !bytes.Equal(drv.MAC(), nicMAC) {
		t.Errorf("MAC %v from RAL/RAH across processes", drv.MAC())
	}
}
