package ipxe_test

import (
	"bytes"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/drivers/ipxe"
	"github.com/nicstack/nicstack/runtime/config"
)

var nicMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}

// fakeUplink is the router's session as the driver sees it.
type fakeUplink struct {
	rx      [][]byte
	bursts  int
	tx      [][]byte
	batches int
}

func (u *fakeUplink) Deliver(f []byte) bool { u.rx = append(u.rx, bytes.Clone(f)); return true }
func (u *fakeUplink) DeliverDone()          { u.bursts++ }
func (u *fakeUplink) FetchDone()            { u.batches++ }
func (u *fakeUplink) Fetch(buf []byte) (int, bool) {
	if len(u.tx) == 0 {
		return 0, false
	}
	f := u.tx[0]
	u.tx = u.tx[1:]
	if len(f) > len(buf) {
		return len(f), true
	}
	return copy(buf, f), true
}

type captureWire struct{ frames [][]byte }

func (w *captureWire) Transmit(frames [][]byte) {
	for _, f := range frames {
		w.frames = append(w.frames, bytes.Clone(f))
	}
}

type linkEvent struct {
	up    bool
	speed int
}

// rig is driver and model in one process on the model's manual clock, with the component's
// event loop played by step.
type rig struct {
	dev   *intel.Device
	clock *regs.ManualClock
	irq   intel.ChanIRQ
	wire  *captureWire
	drv   *ipxe.Driver
	up    *fakeUplink
	open  bool // the Uplink session is open
	links []linkEvent
	logs  strings.Builder // the driver's log lines
}

func newRig(t *testing.T, model string, cfg ipxe.Config) *rig {
	t.Helper()
	m, ok := intel.ModelByName(model)
	if !ok {
		t.Fatalf("no model %q", model)
	}
	r := &rig{clock: &regs.ManualClock{}, irq: intel.NewChanIRQ(), wire: &captureWire{}, up: &fakeUplink{}}
	dma := make([]byte, ipxe.DMASize)
	dev, err := intel.New(make([]byte, regs.RegisterPageSize), dma, intel.DeviceConfig{
		Model: m, MAC: nicMAC, Clock: r.clock, IRQ: r.irq, Wire: r.wire, Autoneg: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.dev = dev
	log := slog.New(slog.NewTextHandler(&r.logs, nil))
	r.drv, err = ipxe.Open(ipxe.Device{Regs: dev, DMA: dma, DeviceID: m.DeviceID, Clock: r.clock, Log: log}, cfg, r.onLink)
	if err != nil {
		t.Fatal(err)
	}
	if up, speed := r.drv.Link(); up {
		r.onLink(up, speed)
	}
	return r
}

// onLink is the component's rule: the Uplink session is open exactly while the link is up.
func (r *rig) onLink(up bool, speed int) {
	r.links = append(r.links, linkEvent{up, speed})
	r.open = up
	if up {
		r.drv.SetUplink(r.up)
		r.drv.Transmit()
	} else {
		r.drv.SetUplink(nil)
	}
}

// step advances the clock, lets the device work and services its interrupt.
func (r *rig) step(dt time.Duration) {
	r.clock.Advance(dt)
	r.dev.Poll()
	select {
	case <-r.irq:
		r.drv.HandleInterrupt()
	default:
	}
}

func (r *rig) waitLink(t *testing.T) {
	t.Helper()
	for range 100 {
		if up, _ := r.drv.Link(); up {
			return
		}
		r.step(100 * time.Microsecond)
	}
	t.Fatal("link did not come up")
}

// frame makes a frame to dst whose payload encodes seq.
func frame(dst net.HardwareAddr, n int, seq int) []byte {
	f := make([]byte, n)
	copy(f, dst)
	copy(f[6:], net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99})
	f[12], f[13] = 0x88, 0xb5
	for i := 14; i < n; i++ {
		f[i] = byte(seq*7 + i)
	}
	f[14], f[15] = byte(seq>>8), byte(seq)
	return f
}

const frameTime = 12304 * time.Nanosecond // a 1514-byte frame at 1 Gbit/s

func sameFrames(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d frames, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: frame %d differs (%d bytes, want %d)", what, i, len(got[i]), len(want[i]))
		}
	}
}

// plainConfig is the default config without tx_bql: the ring fills as the router's bursts
// come, for tests of what the byte limit would otherwise hold back.
func plainConfig() ipxe.Config {
	cfg := ipxe.DefaultConfig()
	cfg.TxBQL = false
	return cfg
}

// TestFramesBothWays sends 1000 frames each way, four times round both rings.
func TestFramesBothWays(t *testing.T) {
	for _, cfg := range []ipxe.Config{
		ipxe.DefaultConfig(),
		{RxIrqThrottle: 0, TxBatch: false, TxIrq: ipxe.TxIrqDescriptorDone},
	} {
		r := newRig(t, "82574L", cfg)
		r.waitLink(t)
		if !bytes.Equal(r.drv.MAC(), nicMAC) {
			t.Fatalf("MAC %v from RAL/RAH, want %v", r.drv.MAC(), nicMAC)
		}
		var out, in [][]byte
		for i := range 1000 {
			out = append(out, frame(net.HardwareAddr{2, 0, 0, 0, 0, 0x99}, 60+i%1455, i))
			in = append(in, frame(nicMAC, 60+(i*7)%1455, i))
		}
		r.up.tx = append(r.up.tx, out...)
		r.drv.Transmit()
		for sent, steps := 0, 0; sent < len(in) || len(r.wire.frames) < len(out) || len(r.up.rx) < len(in); steps++ {
			if steps > 10000 {
				t.Fatalf("stuck: %d sent, %d on the wire, %d delivered", sent, len(r.wire.frames), len(r.up.rx))
			}
			if sent < len(in) {
				sent += r.dev.Receive(in[sent:min(sent+8, len(in))])
			}
			r.step(8 * frameTime)
		}
		sameFrames(t, "wire", r.wire.frames, out)
		sameFrames(t, "uplink", r.up.rx, in)
		c := r.dev.Counters()
		if c.RXNoDescriptor.Load() != 0 || c.TXDropped.Load() != 0 || c.BadDescriptors.Load() != 0 {
			t.Errorf("device dropped frames: rx %d tx %d bad %d", c.RXNoDescriptor.Load(), c.TXDropped.Load(), c.BadDescriptors.Load())
		}
		if dc := r.drv.Counters(); dc.RXFrames.Load() != 1000 || dc.TXFrames.Load() != 1000 {
			t.Errorf("driver counted rx %d tx %d", dc.RXFrames.Load(), dc.TXFrames.Load())
		}
	}
}

// TestRXOverrun: with the driver not servicing the ring, frames beyond the free descriptors
// are dropped and counted, and the ones taken arrive intact.
func TestRXOverrun(t *testing.T) {
	r := newRig(t, "82574L", ipxe.DefaultConfig())
	r.waitLink(t)
	const frames = ipxe.RingSize + 144
	var in [][]byte
	for i := range frames {
		in = append(in, frame(nicMAC, 64+i, i))
	}
	for sent := 0; sent < len(in); r.clock.Advance(frameTime) { // the driver does not run
		sent += r.dev.Receive(in[sent:])
	}
	c := r.dev.Counters()
	if c.RXFrames.Load() != ipxe.RingSize-1 || c.RXNoDescriptor.Load() != frames-(ipxe.RingSize-1) {
		t.Errorf("device took %d frames and dropped %d for want of descriptors; want %d and %d",
			c.RXFrames.Load(), c.RXNoDescriptor.Load(), ipxe.RingSize-1, frames-(ipxe.RingSize-1))
	}
	r.step(time.Millisecond)
	sameFrames(t, "uplink", r.up.rx, in[:ipxe.RingSize-1])
	if r.up.bursts != 1 || r.drv.Counters().RDTWrites.Load() != 1 {
		t.Errorf("%d signals and %d RDT writes for one burst, want 1 and 1", r.up.bursts, r.drv.Counters().RDTWrites.Load())
	}
	more := [][]byte{frame(nicMAC, 100, 1000), frame(nicMAC, 200, 1001)}
	r.dev.Receive(more)
	r.step(time.Millisecond)
	sameFrames(t, "uplink", r.up.rx[ipxe.RingSize-1:], more)
}

// TestLinkDownWhileTraffic pulls the cable while frames flow both ways: the session closes on
// link down and reopens on link up, and traffic resumes.
func TestLinkDownWhileTraffic(t *testing.T) {
	r := newRig(t, "82574L", ipxe.DefaultConfig())
	r.waitLink(t)
	seq := 0
	traffic := func(steps int) {
		for range steps {
			if r.open { // the router queues frames only into an open session
				r.up.tx = append(r.up.tx, frame(net.HardwareAddr{2, 0, 0, 0, 0, 0x99}, 1514, seq))
				r.drv.Transmit()
			}
			r.dev.Receive([][]byte{frame(nicMAC, 1514, seq)})
			seq++
			r.step(frameTime)
		}
	}
	traffic(300)
	r.dev.SetCarrier(false)
	traffic(300)
	if up, _ := r.drv.Link(); up {
		t.Fatal("driver still sees the link up")
	}
	rxDuringDown := len(r.up.rx)
	traffic(100)
	if len(r.up.rx) != rxDuringDown {
		t.Error("frames delivered while the link was down")
	}
	r.dev.SetCarrier(true)
	traffic(300)
	want := []linkEvent{{true, 1000}, {false, 0}, {true, 1000}}
	if len(r.links) != len(want) {
		t.Fatalf("link events %v, want %v", r.links, want)
	}
	for i := range want {
		if r.links[i] != want[i] {
			t.Fatalf("link events %v, want %v", r.links, want)
		}
	}
	for i := 0; i < 1000 && len(r.up.tx) > 0; i++ {
		r.step(frameTime)
	}
	if len(r.up.tx) != 0 {
		t.Errorf("%d frames still queued after the link returned", len(r.up.tx))
	}
	if len(r.up.rx) <= rxDuringDown || len(r.wire.frames) < 500 {
		t.Errorf("traffic did not resume: rx %d (was %d), wire %d", len(r.up.rx), rxDuringDown, len(r.wire.frames))
	}
	for _, f := range r.up.rx {
		s := int(f[14])<<8 | int(f[15])
		if !bytes.Equal(f, frame(nicMAC, 1514, s)) {
			t.Fatalf("frame %d corrupted", s)
		}
	}
}

// sendBatches has the router queue frames in batches of batch, the driver take each batch,
// and the wire drain at line rate; it returns the device's counters.
func sendBatches(t *testing.T, cfg ipxe.Config, frames, batch int) *rig {
	t.Helper()
	r := newRig(t, "82574L", cfg)
	r.waitLink(t)
	for i := 0; i < frames; i += batch {
		for j := range batch {
			r.up.tx = append(r.up.tx, frame(net.HardwareAddr{2, 0, 0, 0, 0, 0x99}, 1514, i+j))
		}
		r.drv.Transmit()
		for range batch {
			r.step(frameTime)
		}
	}
	for range 2 * ipxe.RingSize {
		r.step(frameTime)
	}
	if len(r.wire.frames) != frames {
		t.Fatalf("%d frames on the wire, want %d", len(r.wire.frames), frames)
	}
	return r
}

func TestTxBatchDoorbells(t *testing.T) {
	const frames, batch = 2048, 64
	cfg := plainConfig()
	cfg.TxBatch = false
	perFrame := sendBatches(t, cfg, frames, batch).drv.Counters().TDTWrites.Load()
	cfg.TxBatch = true
	batched := sendBatches(t, cfg, frames, batch).drv.Counters().TDTWrites.Load()
	t.Logf("TDT writes for %d frames: tx_batch=no %d, yes %d", frames, perFrame, batched)
	if perFrame != frames {
		t.Errorf("tx_batch=no: %d TDT writes, want one per frame (%d)", perFrame, frames)
	}
	if batched*16 > frames {
		t.Errorf("tx_batch=yes: %d TDT writes for %d frames, want at most one per 16", batched, frames)
	}
}

// TestTxIrqModes: descriptor_done interrupts per sent descriptor (coalesced while the line is
// asserted); queue_empty only while frames wait for room in a full ring, at least tenfold
// fewer, and not at all while the ring keeps up.
func TestTxIrqModes(t *testing.T) {
	const frames, batch = 2048, 512 // batches larger than the ring: it fills
	cfg := ipxe.Config{RxIrqThrottle: 0, TxBatch: true, TxIrq: ipxe.TxIrqDescriptorDone}
	dd := sendBatches(t, cfg, frames, batch).dev.Counters()
	cfg.TxIrq = ipxe.TxIrqQueueEmpty
	qe := sendBatches(t, cfg, frames, batch).dev.Counters()
	t.Logf("TX interrupts for %d frames: descriptor_done %d (TXDW), queue_empty %d (TXQE)",
		frames, dd.Interrupts.Load(), qe.Interrupts.Load())
	if dd.IntTXQE.Load() != 0 || qe.IntTXDW.Load() != 0 {
		t.Error("the unrequested TX cause raised interrupts")
	}
	if dd.IntTXDW.Load() < 10*qe.IntTXQE.Load() || qe.IntTXQE.Load() == 0 {
		t.Errorf("TXDW interrupts %d, TXQE %d: want queue_empty at least tenfold fewer, and some to resume the backlog",
			dd.IntTXDW.Load(), qe.IntTXQE.Load())
	}
	if kept := sendBatches(t, cfg, frames, 64).dev.Counters(); kept.IntTXQE.Load() != 0 {
		t.Errorf("queue_empty with a ring that never filled: %d TXQE interrupts, want none", kept.IntTXQE.Load())
	}
}

// TestPhyReset: on the i217-LM a PHY reset at open leaves the link at 10 Mbit/s; phy_reset
// auto skips it there, and still resets the 82574L's PHY, which keeps 1000.
func TestPhyReset(t *testing.T) {
	for _, c := range []struct {
		model string
		reset ipxe.PhyReset
		speed int
	}{
		{"i217-LM", ipxe.PhyResetYes, 10},
		{"i217-LM", ipxe.PhyResetAuto, 1000},
		{"i217-LM", ipxe.PhyResetNo, 1000},
		{"82574L", ipxe.PhyResetAuto, 1000},
		{"82574L", ipxe.PhyResetYes, 1000},
	} {
		cfg := ipxe.DefaultConfig()
		cfg.PhyReset = c.reset
		r := newRig(t, c.model, cfg) // opens while the PHY still negotiates: link down
		r.waitLink(t)
		if _, speed := r.drv.Link(); speed != c.speed {
			t.Errorf("%s phy_reset=%v: link at %d, want %d", c.model, c.reset, speed, c.speed)
		}
	}
}

func TestConfigureLive(t *testing.T) {
	r := newRig(t, "82574L", plainConfig())
	if got := r.dev.Read32(regs.ITR); got != ipxe.DefaultRxIrqThrottle {
		t.Fatalf("ITR %d after open, want %d", got, ipxe.DefaultRxIrqThrottle)
	}
	if got := r.dev.Read32(regs.IMS); got != regs.IntLSC|regs.IntRXT0 { // TXQE: only while the ring is full
		t.Fatalf("IMS %#x after open", got)
	}
	cfg := r.drv.Config()
	cfg.RxIrqThrottle, cfg.TxIrq = 5580, ipxe.TxIrqDescriptorDone
	if err := r.drv.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if got := r.dev.Read32(regs.ITR); got != 5580 {
		t.Errorf("ITR %d after the change, want 5580", got)
	}
	if got := r.dev.Read32(regs.IMS); got != regs.IntLSC|regs.IntRXT0|regs.IntTXDW {
		t.Errorf("IMS %#x after switching to descriptor_done", got)
	}
}

func TestParseConfig(t *testing.T) {
	n, err := config.Parse("nic.xml", []byte(`<config rx_irq_throttle="5580" tx_batch="no" tx_irq="descriptor_done" tx_bql="yes" tx_bql_limit_max="125000" rx_poll_on_tx="no" phy_reset="yes" pci="0000:00:02.0"/>`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ipxe.ParseConfig(n, "ipxe_nic")
	want := ipxe.Config{RxIrqThrottle: 5580, TxBatch: false, TxIrq: ipxe.TxIrqDescriptorDone, TxBQL: true, TxBQLLimitMax: 125000, PhyReset: ipxe.PhyResetYes, PCI: "0000:00:02.0"}
	if err != nil || cfg != want {
		t.Errorf("got %+v, %v; want %+v", cfg, err, want)
	}
	n, _ = config.Parse("nic.xml", []byte(`<config/>`))
	if cfg, err := ipxe.ParseConfig(n, "ipxe_nic"); err != nil || cfg != ipxe.DefaultConfig() {
		t.Errorf("empty config: %+v, %v", cfg, err)
	}
	n, _ = config.Parse("nic.xml", []byte(`<config rx_irq_throttle="adaptive"/>`))
	if cfg, err := ipxe.ParseConfig(n, "ipxe_nic"); err != nil || !cfg.AdaptiveThrottle {
		t.Errorf("adaptive: %+v, %v", cfg, err)
	}
	n, _ = config.Parse("nic.xml", []byte(`<config rx_irq_throttel="651"/>`))
	if errs := config.Check(n, ipxe.ConfigSchema); len(errs) != 1 {
		t.Errorf("a misspelt attribute gave %v", errs)
	}
	for _, bad := range []string{
		`<config rx_irq_throttle="70000"/>`,
		`<config rx_irq_throttle="dynamic"/>`,
		`<config tx_irq="always"/>`,
		`<config phy_reset="maybe"/>`,
		`<config tx_batch="sometimes"/>`,
		`<config tx_bql="auto"/>`,
		`<config tx_bql_limit_max="1ms"/>`,
		`<config tx_bql_limit_max="-1"/>`,
		`<config tx_bql_limit_max="2M"/>`,
		`<config rx_poll_on_tx="sometimes"/>`,
		`<config pci="00:02.0"/>`,
		`<config pci="/dev/vfio/2"/>`,
	} {
		n, err := config.Parse("nic.xml", []byte(bad))
		if err != nil {
			t.Fatal(err)
		}
		_, err = ipxe.ParseConfig(n, "ipxe_nic")
		var ce *config.Error
		attr := bad[len("<config "):strings.IndexByte(bad, '=')]
		if !errors.As(err, &ce) || ce.Pos.Line != 1 || !strings.Contains(err.Error(), "nic.xml:1:") || !strings.Contains(err.Error(), attr) {
			t.Errorf("%s: error %v, want a positioned config error naming %s", bad, err, attr)
		}
	}
}

// lockedWire is a wire the device's goroutine writes and the test reads.
type lockedWire struct {
	mu sync.Mutex
	captureWire
}

func (w *lockedWire) Transmit(frames [][]byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.captureWire.Transmit(frames)
}

func (w *lockedWire) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.frames)
}

// TestPostedRegisters runs the device in its own goroutine on the real clock and the driver in
// another, talking only through the register page, the posted-write queue and DMA memory as
// they will between processes (heap memory here, so the race detector sees it).
func TestPostedRegisters(t *testing.T) {
	page := make([]byte, regs.RegisterPageSize)
	q, err := regs.NewWriteQueue(make([]byte, regs.WriteQueueSize))
	if err != nil {
		t.Fatal(err)
	}
	dma := make([]byte, ipxe.DMASize)
	irq, wire := intel.NewChanIRQ(), &lockedWire{}
	m, _ := intel.ModelByName("82574L")
	dev, err := intel.New(page, dma, intel.DeviceConfig{Model: m, MAC: nicMAC, IRQ: irq, Wire: wire, Posted: q, Autoneg: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stopDevice := make(chan struct{})
	var device sync.WaitGroup
	device.Go(func() { dev.Run(stopDevice) })
	defer func() { close(stopDevice); device.Wait() }()

	mmio, err := regs.NewPostedRegisters(page, q, dev.Kick)
	if err != nil {
		t.Fatal(err)
	}
	var out, in [][]byte
	for i := range 1000 {
		out = append(out, frame(net.HardwareAddr{2, 0, 0, 0, 0, 0x99}, 60+i%1455, i))
		in = append(in, frame(nicMAC, 60+(i*3)%1455, i))
	}
	up := &fakeUplink{tx: out}
	drv, err := ipxe.Open(ipxe.Device{Regs: mmio, DMA: dma, DeviceID: m.DeviceID}, ipxe.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	linkUp, stopDriver := make(chan struct{}), make(chan struct{})
	var driver sync.WaitGroup
	driver.Go(func() { // the driver component's event loop: from here on only it touches drv
		opened := false
		for {
			select {
			case <-irq:
				drv.HandleInterrupt()
			case <-stopDriver:
				return
			case <-time.After(time.Millisecond): // the router's packet_avail, coarsely
			}
			if isUp, _ := drv.Link(); isUp && !opened {
				opened = true
				drv.SetUplink(up)
				close(linkUp)
			}
			drv.Transmit()
		}
	})
	select {
	case <-linkUp:
	case <-time.After(5 * time.Second):
		t.Fatal("link did not come up")
	}
	c := dev.Counters()
	deadline := time.Now().Add(10 * time.Second)
	for sent := 0; sent < len(in) && time.Now().Before(deadline); {
		sent += dev.Receive(in[sent:min(sent+16, len(in))])
		time.Sleep(100 * time.Microsecond)
	}
	for (wire.count() < len(out) || c.TXFrames.Load() < uint64(len(out)) || c.RXFrames.Load() < uint64(len(in))) &&
		time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(5 * time.Millisecond) // the last interrupt, ITR-delayed
	close(stopDriver)
	driver.Wait()
	sameFrames(t, "wire", wire.frames, out)
	sameFrames(t, "uplink", up.rx, in)
	if mmio.Stalls.Load() != 0 {
		t.Errorf("%d register accesses stalled", mmio.Stalls.Load())
	}
}

// hostileRegs is a device that answers every read with garbage.
type hostileRegs struct{ rng *rand.Rand }

func (h hostileRegs) Read32(uint32) uint32   { return h.rng.Uint32() }
func (h hostileRegs) Write32(uint32, uint32) {}

// TestHostileDevice: registers and DMA memory are the device's to scribble on; the driver must
// neither panic nor hand the router more than a buffer.
func TestHostileDevice(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dma := make([]byte, ipxe.DMASize)
	mmio := hostileRegs{rng}
	for range 20 {
		cfg := ipxe.DefaultConfig()
		cfg.PhyReset = ipxe.PhyReset(rng.IntN(3))
		drv, err := ipxe.Open(ipxe.Device{Regs: mmio, DMA: dma, DeviceID: 0x10D3}, cfg, func(bool, int) {})
		if err != nil {
			continue // "did not come out of reset" is a fine answer to garbage
		}
		up := &fakeUplink{}
		drv.SetUplink(up)
		for range 50 {
			for range 64 {
				dma[rng.IntN(len(dma))] = byte(rng.Uint32())
			}
			for i := 0; i < 2*ipxe.RingSize*16; i += 16 { // DD everywhere, random lengths
				dma[i+12] |= byte(rng.IntN(4))
				dma[i+8], dma[i+9] = byte(rng.Uint32()), byte(rng.Uint32())
			}
			up.tx = append(up.tx, frame(nicMAC, 60+rng.IntN(3000), 0))
			drv.Transmit()
			drv.HandleInterrupt()
		}
		for _, f := range up.rx {
			if len(f) > ipxe.BufSize {
				t.Fatalf("delivered %d bytes from a %d-byte buffer", len(f), ipxe.BufSize)
			}
		}
	}
}
