package ipxe_test

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/drivers/ipxe"
)

var farMAC = net.HardwareAddr{2, 0, 0, 0, 0, 0x99}

// exchange sends n frames each way from seq on and steps until they are through (or the
// steps run out); it returns how many reached the wire and the Uplink.
func (r *rig) exchange(seq, n int) (wire, delivered int) {
	w0, d0 := len(r.wire.frames), len(r.up.rx)
	if r.open {
		for i := range n {
			r.up.tx = append(r.up.tx, frame(farMAC, 1514, seq+i))
		}
		r.drv.Transmit()
	}
	for i := range n {
		r.dev.Receive([][]byte{frame(nicMAC, 1514, seq+i)})
		r.step(frameTime)
	}
	for range 2 * ipxe.RingSize {
		r.step(frameTime)
	}
	return len(r.wire.frames) - w0, len(r.up.rx) - d0
}

// intact checks that every frame delivered and sent is one the test made, whole.
func (r *rig) intact(t *testing.T) {
	t.Helper()
	for _, f := range r.up.rx {
		if s := int(f[14])<<8 | int(f[15]); !bytes.Equal(f, frame(nicMAC, 1514, s)) {
			t.Fatalf("delivered frame %d corrupted", s)
		}
	}
	for _, f := range r.wire.frames {
		if s := int(f[14])<<8 | int(f[15]); !bytes.Equal(f, frame(farMAC, 1514, s)) {
			t.Fatalf("sent frame %d corrupted", s)
		}
	}
}

// TestDeviceVanishes pulls the NIC out of its slot while frames flow: its registers read all
// ones. The driver reports the link down and the fault (a log line, device_gone), touches no
// register while it is gone, and when the device answers again resets it and carries on.
func TestDeviceVanishes(t *testing.T) {
	r := newRig(t, "82574L", ipxe.DefaultConfig())
	r.waitLink(t)
	if w, d := r.exchange(0, 50); w != 50 || d != 50 {
		t.Fatalf("before the fault: %d sent, %d delivered, want 50 and 50", w, d)
	}
	r.up.tx = append(r.up.tx, frame(farMAC, 1514, 100))
	r.dev.Inject(intel.FaultGone)
	r.drv.Transmit()
	r.drv.HandleInterrupt() // an interrupt already on its way
	r.drv.Watchdog()
	if up, _ := r.drv.Link(); up || r.open {
		t.Fatal("link still up with the device gone")
	}
	c := r.drv.Counters()
	if c.DeviceGone.Load() != 1 || !strings.Contains(r.logs.String(), "registers read all ones") {
		t.Fatalf("device_gone %d, log %q", c.DeviceGone.Load(), r.logs.String())
	}
	for range 5 { // a gone device stays one fault
		r.drv.Watchdog()
		r.drv.HandleInterrupt()
		r.exchange(200, 10)
	}
	if c.DeviceGone.Load() != 1 {
		t.Errorf("device_gone %d for one removal", c.DeviceGone.Load())
	}
	r.dev.Inject(intel.FaultNone)
	r.drv.Watchdog()
	r.waitLink(t)
	if c.DeviceResets.Load() != 1 || !strings.Contains(r.logs.String(), "answers again") {
		t.Errorf("device_resets %d, log %q", c.DeviceResets.Load(), r.logs.String())
	}
	r.up.tx = nil // what the router queued while the link was down went with its session
	if w, d := r.exchange(300, 50); w != 50 || d != 50 {
		t.Fatalf("after the device came back: %d sent, %d delivered, want 50 and 50", w, d)
	}
	want := []linkEvent{{true, 1000}, {false, 0}, {true, 1000}}
	if len(r.links) != 3 || r.links[0] != want[0] || r.links[1] != want[1] || r.links[2] != want[2] {
		t.Errorf("link events %v, want %v", r.links, want)
	}
	r.intact(t)
}

// TestDMAFault has the IOMMU refuse the device's DMA: its transmit queue stops with frames
// in it. The watchdog reports the hang (a log line, tx_hangs) and resets the device; the
// link and with it the Uplink session stay, and traffic resumes once DMA works again.
func TestDMAFault(t *testing.T) {
	r := newRig(t, "82574L", plainConfig())
	r.waitLink(t)
	r.exchange(0, 20)
	r.dev.Inject(intel.FaultDMA)
	w, d := r.exchange(100, 20)
	if w != 0 || d != 0 {
		t.Fatalf("%d frames sent and %d delivered without DMA", w, d)
	}
	r.drv.Watchdog() // the queue is busy
	r.drv.Watchdog() // and has not moved for a tick: hung
	c := r.drv.Counters()
	if c.TXHangs.Load() != 1 || c.DeviceResets.Load() != 1 || !strings.Contains(r.logs.String(), "transmit queue stood still") {
		t.Fatalf("tx_hangs %d, device_resets %d, log %q", c.TXHangs.Load(), c.DeviceResets.Load(), r.logs.String())
	}
	if c.TXDropped.Load() != 20 {
		t.Errorf("tx_dropped %d, want the 20 frames the reset lost", c.TXDropped.Load())
	}
	r.drv.Watchdog() // an idle queue is no hang
	if c.TXHangs.Load() != 1 {
		t.Errorf("tx_hangs %d on an idle queue", c.TXHangs.Load())
	}
	r.dev.Inject(intel.FaultNone)
	if w, d := r.exchange(200, 50); w != 50 || d != 50 {
		t.Fatalf("after the fault: %d sent, %d delivered, want 50 and 50", w, d)
	}
	if len(r.links) != 1 || !r.open {
		t.Errorf("link events %v: the session did not stay", r.links)
	}
	r.intact(t)
}

// TestGarbageDescriptors has the device write nonsense into receive descriptors (lengths past
// the buffer, no end of packet, zero lengths, error bits): nothing reaches the router, the bad
// ones are counted and logged, and good frames pass again once the device behaves.
func TestGarbageDescriptors(t *testing.T) {
	r := newRig(t, "82574L", ipxe.DefaultConfig())
	r.waitLink(t)
	r.dev.Inject(intel.FaultGarbage)
	for round := range 3 { // more than a ring of garbage
		if _, d := r.exchange(round*200, 200); d != 0 {
			t.Fatalf("%d garbage descriptors delivered", d)
		}
	}
	c := r.drv.Counters()
	// Of every five kinds, the one with an error bit is an errored frame, not garbage.
	if bad, dropped := c.RXBadDescriptors.Load(), c.RXDropped.Load(); bad != 480 || dropped != 600 {
		t.Errorf("rx_bad_descriptors %d, rx_dropped %d, want 480 and 600", bad, dropped)
	}
	r.drv.Watchdog()
	if !strings.Contains(r.logs.String(), "count=480") {
		t.Errorf("log %q", r.logs.String())
	}
	r.dev.Inject(intel.FaultNone)
	if w, d := r.exchange(1000, 50); w != 50 || d != 50 {
		t.Fatalf("after the fault: %d sent, %d delivered, want 50 and 50", w, d)
	}
	r.intact(t)
}

// TestPausedQueueIsNoHang: the link partner's PAUSE stops the transmit queue with frames in
// it. While STATUS.TXOFF says so the watchdog takes that for no hang (as e1000e's does not
// check for one then) and resets nothing; the frames go once the partner's XON comes.
func TestPausedQueueIsNoHang(t *testing.T) {
	r := newRig(t, "82574L", plainConfig())
	r.waitLink(t)
	r.dev.Write32(regs.CTRL, r.dev.Read32(regs.CTRL)|regs.CtrlRFCE) // as auto-negotiation resolves it
	if _, ok := r.dev.ReceivePause(intel.MaxPauseQuanta); !ok {
		t.Fatal("PAUSE not honoured")
	}
	for i := range 20 {
		r.up.tx = append(r.up.tx, frame(farMAC, 1514, i))
	}
	r.drv.Transmit()
	for range 3 {
		r.step(frameTime)
		r.drv.Watchdog()
	}
	c := r.drv.Counters()
	if len(r.wire.frames) != 0 {
		t.Fatalf("%d frames sent while paused", len(r.wire.frames))
	}
	if c.TXHangs.Load() != 0 || c.DeviceResets.Load() != 0 {
		t.Fatalf("a paused queue taken for a hang: tx_hangs %d, device_resets %d", c.TXHangs.Load(), c.DeviceResets.Load())
	}
	r.dev.ReceivePause(0)
	for range 2 * ipxe.RingSize {
		r.step(frameTime)
	}
	if len(r.wire.frames) != 20 {
		t.Fatalf("%d of 20 frames sent after the XON", len(r.wire.frames))
	}
	r.intact(t)
}
