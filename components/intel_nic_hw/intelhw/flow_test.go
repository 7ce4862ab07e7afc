package intelhw

import (
	"net"
	"testing"
	"time"

	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// flowRig is a NIC whose session wire leads to a test far end, with a device on heap memory
// and a manual clock that the test plugs in itself (no driver process, no Run).
type flowRig struct {
	nic *NIC
	dev *intel.Device
	far *packetstream.Client
	cnt *intel.Counters
	wcn *Counters
}

func newFlowRig(t *testing.T, flowControl bool) *flowRig {
	t.Helper()
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	r := &flowRig{cnt: intel.NewCounters(nil), wcn: NewCounters(nil)}
	r.nic = New(intel.DeviceConfig{MAC: mac, FlowControl: flowControl}, r.cnt, r.wcn)
	cfg := packetstream.DefaultConfig()
	far, srv, err := packetstream.NewHeapSession(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.far = far
	if err := r.nic.AttachWire(srv); err != nil {
		t.Fatal(err)
	}
	clock := &regs.ManualClock{}
	r.dev, err = intel.New(make([]byte, regs.RegisterPageSize), make([]byte, 1<<16), intel.DeviceConfig{
		MAC: mac, Clock: clock, Autoneg: time.Millisecond, FlowControl: flowControl, Counters: r.cnt,
	})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Millisecond)
	r.dev.Poll() // the link comes up, flow control resolved
	r.nic.mu.Lock()
	r.nic.dev = r.dev
	r.nic.mu.Unlock()
	t.Cleanup(func() {
		r.nic.mu.Lock()
		r.nic.dev = nil
		r.nic.mu.Unlock()
		r.nic.DetachWire()
		far.Close()
		srv.Close()
	})
	return r
}

// send hands the wire a batch of k full-sized frames, as the device's Poll does.
func (r *flowRig) send(k int) {
	frames := make([][]byte, k)
	for i := range frames {
		frames[i] = make([]byte, 1514)
	}
	(*wireOut)(r.nic).Transmit(frames)
}

// inFlight is what stands in the far end's receive stream, as the wire counts it.
func (r *flowRig) inFlight() int {
	wr := r.nic.wire
	wr.txMu.Lock()
	defer wr.txMu.Unlock()
	return wr.srv.RX.InFlight()
}

// ack has the far end take and acknowledge k frames.
func (r *flowRig) ack(t *testing.T, k int) {
	t.Helper()
	sink := r.far.RX
	for range k {
		p, ok := sink.TryGet()
		if !ok || !sink.TryAck(p) {
			t.Fatal("the far end found no frame to take or no room to acknowledge")
		}
	}
	sink.Wakeup()
}

// waitFor polls cond until it holds; a bound only against a hang, not a timed assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after 10 s", what)
		}
	}
}

// TestFlowControlWatermarks: the far end's receive stream crossing the high watermark (768
// of its 1024 descriptors) pauses the device, nothing dropped; acknowledgements that leave it
// above the low watermark (256) do not resume it, those that bring it below do (XON). A far end
// that stops acknowledging: the pause runs out, the next batch above the watermark pauses
// again, and what finds the stream full is dropped as without flow control.
func TestFlowControlWatermarks(t *testing.T) {
	r := newFlowRig(t, true)
	for range 11 {
		r.send(64)
	}
	if r.dev.Paused() || r.cnt.XOFFReceived.Load() != 0 {
		t.Fatalf("paused with 704 frames of 1024 in the stream")
	}
	r.send(64)
	if !r.dev.Paused() || r.cnt.XOFFReceived.Load() != 1 || r.wcn.WireTXDropped.Load() != 0 {
		t.Fatalf("768 frames in the stream: paused %v, xoff_rx %d, wire_tx_dropped %d; want paused once, none dropped",
			r.dev.Paused(), r.cnt.XOFFReceived.Load(), r.wcn.WireTXDropped.Load())
	}

	r.ack(t, 500) // 268 left: above the low watermark
	waitFor(t, "collected", func() bool { return r.inFlight() == 268 })
	if !r.dev.Paused() || r.cnt.XONReceived.Load() != 0 {
		t.Fatal("resumed above the low watermark")
	}
	r.ack(t, 20) // 248: below
	waitFor(t, "resumed", func() bool { return !r.dev.Paused() })
	if r.cnt.XONReceived.Load() != 1 {
		t.Errorf("xon_rx %d, want 1", r.cnt.XONReceived.Load())
	}

	// The far end stops acknowledging.
	for range 8 {
		r.send(64) // 760
	}
	if r.cnt.XOFFReceived.Load() != 1 {
		t.Fatalf("xoff_rx %d at 760 frames, want 1", r.cnt.XOFFReceived.Load())
	}
	r.send(64) // 824
	if r.cnt.XOFFReceived.Load() != 2 {
		t.Fatalf("xoff_rx %d at 824 frames, want 2", r.cnt.XOFFReceived.Load())
	}
	wr := r.nic.wire
	waitFor(t, "run out at the wire", func() bool {
		wr.txMu.Lock()
		defer wr.txMu.Unlock()
		return !wr.flow.paused
	})
	for range 4 {
		r.send(64) // 1080: 56 do not fit
	}
	if got := r.cnt.XOFFReceived.Load(); got != 3 {
		t.Errorf("xoff_rx %d after the pause ran out with the stream still full, want 3", got)
	}
	if got := r.wcn.WireTXDropped.Load(); got != 56 {
		t.Errorf("wire_tx_dropped %d with the stream full, want 56", got)
	}
}

// Without flow control the wire drops what the stream has no room for and never pauses.
func TestFlowControlOff(t *testing.T) {
	r := newFlowRig(t, false)
	for range 17 {
		r.send(64) // 1088
	}
	if r.dev.Paused() || r.cnt.XOFFReceived.Load() != 0 || r.wcn.WireTXDropped.Load() != 64 {
		t.Errorf("paused %v, xoff_rx %d, wire_tx_dropped %d; want no pause and 64 dropped",
			r.dev.Paused(), r.cnt.XOFFReceived.Load(), r.wcn.WireTXDropped.Load())
	}
}
