package ipxe_test

import (
	"net"
	"testing"
	"time"

	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/drivers/ipxe"
)

// traffic feeds m an interrupt every period for d from *now on, each carrying frames of
// bytes in all, rx of them received full frames, and returns the classes it went through (a
// change each).
func traffic(m *ipxe.Moderation, now *time.Duration, d, period time.Duration, frames, bytes, rx uint64) []ipxe.Latency {
	var moves []ipxe.Latency
	w := ipxe.Work{Frames: frames, Bytes: bytes, RXFrames: rx, RXBytes: rx * 1514, RXPass: rx}
	for end := *now + d; *now < end; *now += period {
		if class, changed := m.Interrupt(*now, w); changed {
			moves = append(moves, class)
		}
	}
	return moves
}

func sameMoves(t *testing.T, what string, got []ipxe.Latency, want ...ipxe.Latency) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: moves %v, want %v", what, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: moves %v, want %v", what, got, want)
		}
	}
}

// Idle, then a stream, then request/response: moderation starts at the lowest latency, climbs
// to bulk once the stream has filled two intervals, and drops back to the lowest once two
// intervals carried only small exchanges; the counters say how long each class held.
func TestModerationIdleBulkRequestResponse(t *testing.T) {
	cnt := ipxe.NewCounters(nil)
	now := time.Duration(0)
	m := ipxe.NewModeration(now, cnt)
	if m.Class() != ipxe.LowestLatency {
		t.Fatalf("starts at %v", m.Class())
	}
	now += 20 * time.Millisecond // idle: no interrupts at all

	// A TCP stream at ~1 Gbit/s, ITR off: an interrupt per driver round trip (100 µs) with 8
	// full frames in and 4 acknowledgements out.
	sameMoves(t, "stream", traffic(m, &now, 12*time.Millisecond, 100*time.Microsecond, 12, 8*1514+4*66, 8), ipxe.BulkLatency)
	// At bulk's ~4000 interrupts/s the same stream piles up 20 frames per interrupt, a small
	// part of the ring: after four such intervals it is a steady stream.
	sameMoves(t, "stream at bulk", traffic(m, &now, 20*time.Millisecond, 250*time.Microsecond, 30, 20*1514+10*66, 20), ipxe.StreamLatency)
	// At ~1000 interrupts/s it stays.
	sameMoves(t, "stream at stream", traffic(m, &now, 80*time.Millisecond, time.Millisecond, 120, 80*1514+40*66, 80))
	// Request/response: a 100-byte request in, a 100-byte answer out per interrupt.
	sameMoves(t, "request/response", traffic(m, &now, 20*time.Millisecond, 200*time.Microsecond, 2, 200, 0), ipxe.LowestLatency)

	if cnt.ITRChanges.Load() != 3 {
		t.Errorf("itr_changes %d, want 3", cnt.ITRChanges.Load())
	}
	m.Interrupt(now+time.Second, ipxe.Work{Frames: 1, Bytes: 100}) // closes the last interval
	lowest, low, bulk, stream := cnt.ITRLowestMS.Load(), cnt.ITRLowMS.Load(), cnt.ITRBulkMS.Load(), cnt.ITRStreamMS.Load()
	t.Logf("itr_lowest_ms %d, itr_low_ms %d, itr_bulk_ms %d, itr_stream_ms %d", lowest, low, bulk, stream)
	// bulk from the stream's third interval (8 ms in) for four intervals (16 ms), stream
	// until request/response's third (8 ms)
	if low != 0 || bulk < 14 || bulk > 18 || stream < 92 || stream > 100 || lowest+low+bulk+stream < 1150 {
		t.Errorf("time per class: lowest %d, low %d, bulk %d, stream %d ms", lowest, low, bulk, stream)
	}
}

// The stream class is left for bulk at once when an interrupt took most of the RX ring (and
// then needs twice as long to return); a sent stream enters it as a received one does, unless
// the TX ring has a byte limit.
func TestModerationStreamGuards(t *testing.T) {
	now := time.Duration(0)
	m := ipxe.NewModeration(now, ipxe.NewCounters(nil))
	stream := func(d time.Duration) []ipxe.Latency {
		return traffic(m, &now, d, 250*time.Microsecond, 30, 20*1514+10*66, 20)
	}
	sameMoves(t, "stream", stream(40*time.Millisecond), ipxe.BulkLatency, ipxe.StreamLatency)
	const most = ipxe.RingSize*3/4 + 8
	if class, changed := m.Interrupt(now, ipxe.Work{Frames: most, Bytes: most * 1514, RXFrames: most, RXBytes: most * 1514, RXPass: most}); !changed || class != ipxe.BulkLatency {
		t.Fatalf("an interrupt with %d frames: %v (changed %v), want bulk", most, class, changed)
	}
	sameMoves(t, "four intervals after the ring came close to full", stream(4*ipxe.ModerationInterval))
	sameMoves(t, "stream again", stream(20*time.Millisecond), ipxe.StreamLatency)
	// As many frames taken in passes of a few each (rx_poll_on_tx) never filled the ring.
	if class, changed := m.Interrupt(now, ipxe.Work{Frames: most, Bytes: most * 1514, RXFrames: most, RXBytes: most * 1514, RXPass: 8}); changed || class != ipxe.StreamLatency {
		t.Fatalf("%d frames in passes of 8: %v (changed %v), want stream", most, class, changed)
	}

	sent := ipxe.NewModeration(now, ipxe.NewCounters(nil))
	// The guest sends: 20 full frames out and 10 acknowledgements in per interrupt.
	sameMoves(t, "a sent stream", traffic(sent, &now, 100*time.Millisecond, 250*time.Microsecond, 30, 20*1514+10*66, 0), ipxe.BulkLatency, ipxe.StreamLatency)

	// With a TX byte limit the sent stream stays at bulk (the limit would otherwise learn
	// 1.43 ms of wire between completions), a received one still becomes a stream, and a
	// limit switched on in the stream class leaves it at the next verdicts.
	limited := ipxe.NewModeration(now, ipxe.NewCounters(nil))
	limited.SetTXLimit(true)
	sameMoves(t, "a sent stream with tx_bql", traffic(limited, &now, 100*time.Millisecond, 250*time.Microsecond, 30, 20*1514+10*66, 0), ipxe.BulkLatency)
	sameMoves(t, "a received stream with tx_bql", traffic(limited, &now, 40*time.Millisecond, 250*time.Microsecond, 30, 20*1514+10*66, 20), ipxe.StreamLatency)
	sent.SetTXLimit(true)
	sameMoves(t, "tx_bql switched on in a sent stream", traffic(sent, &now, 20*time.Millisecond, 1430*time.Microsecond, 150, 100*1514+50*66, 0), ipxe.BulkLatency)
}

// Hysteresis: one interval of a burst among request/response does not move ITR; traffic
// between the thresholds stays in the class it is in, bulk or low; an idle gap drops to the
// lowest latency at once, a gap of the driver's (frames piled up meanwhile) does not.
func TestModerationHysteresis(t *testing.T) {
	now := time.Duration(0)
	m := ipxe.NewModeration(now, ipxe.NewCounters(nil))
	rr := func(d time.Duration) []ipxe.Latency {
		return traffic(m, &now, d, 200*time.Microsecond, 2, 200, 0)
	}
	burst := func(d time.Duration) []ipxe.Latency {
		return traffic(m, &now, d, 100*time.Microsecond, 12, 8*1514+4*66, 8)
	}
	// 8 ms: the burst starts an interval and fills it (intervals close at the first interrupt
	// past their end)
	sameMoves(t, "request/response", rr(8*time.Millisecond))
	sameMoves(t, "one burst interval", burst(ipxe.ModerationInterval))
	sameMoves(t, "request/response again", rr(8*time.Millisecond))
	sameMoves(t, "two burst intervals", burst(3*ipxe.ModerationInterval), ipxe.BulkLatency)

	// ~150 Mbit/s of full frames: 3 frames per bulk interrupt (250 µs), less than to enter
	// bulk from low, more than to leave it.
	sameMoves(t, "3 frames per interrupt at bulk", traffic(m, &now, 50*time.Millisecond, 250*time.Microsecond, 4, 3*1514+66, 3))
	// A frame per interrupt (166 µs, ~70 Mbit/s at low's interval) asks for low: it leaves bulk...
	sameMoves(t, "a frame per interrupt", traffic(m, &now, 50*time.Millisecond, 166*time.Microsecond, 2, 1514+66, 1), ipxe.LowLatency)
	// ...and 3 frames per interrupt, which held bulk, do not bring it back from low.
	sameMoves(t, "3 frames per interrupt at low", traffic(m, &now, 50*time.Millisecond, 250*time.Microsecond, 4, 3*1514+66, 3))
	if m.Class() != ipxe.LowLatency {
		t.Fatalf("class %v, want low", m.Class())
	}

	now += 10 * time.Millisecond // the driver did not run, while frames piled up
	if class, changed := m.Interrupt(now, ipxe.Work{Frames: 200, Bytes: 200 * 1514}); changed || class != ipxe.LowLatency {
		t.Errorf("first interrupt after the driver was away: %v (changed %v), want low", class, changed)
	}
	now += ipxe.ModerationInterval // the line goes quiet
	if class, changed := m.Interrupt(now, ipxe.Work{Frames: 1, Bytes: 100}); !changed || class != ipxe.LowestLatency {
		t.Errorf("first interrupt after an idle interval: %v (changed %v), want lowest", class, changed)
	}
}

// With rx_irq_throttle="adaptive" the driver writes ITR at open (the lowest latency's 0) and
// then only when the class changes, to the class's interval: a stream received through the
// emulated NIC takes it to bulk and then to the stream class, a quiet line back to 0.
func TestAdaptiveThrottleWritesITR(t *testing.T) {
	cfg := ipxe.DefaultConfig()
	cfg.AdaptiveThrottle = true
	r := newRig(t, "82574L", cfg)
	r.waitLink(t)
	if got := r.dev.Read32(regs.ITR); got != 0 {
		t.Fatalf("ITR %d after open, want 0", got)
	}
	itrs := map[uint32]bool{}
	for seq := range 3000 { // 37 ms at line rate
		r.dev.Receive([][]byte{frame(nicMAC, 1514, seq)})
		if seq%2 == 0 { // an acknowledgement back for every second segment
			r.up.tx = append(r.up.tx, frame(net.HardwareAddr{2, 0, 0, 0, 0, 0x99}, 66, seq))
			r.drv.Transmit()
		}
		r.step(frameTime)
		itrs[r.dev.Read32(regs.ITR)] = true
	}
	c := r.drv.Counters()
	if got := r.dev.Read32(regs.ITR); got != ipxe.StreamLatency.ITR() || !itrs[ipxe.BulkLatency.ITR()] {
		t.Fatalf("ITR %d after a stream (%d changes), want bulk's %d, then the stream class's %d", got, c.ITRChanges.Load(), ipxe.BulkLatency.ITR(), ipxe.StreamLatency.ITR())
	}
	for itr := range itrs {
		if itr != ipxe.LowestLatency.ITR() && itr != ipxe.LowLatency.ITR() && itr != ipxe.BulkLatency.ITR() && itr != ipxe.StreamLatency.ITR() {
			t.Errorf("ITR held %d, no class's interval", itr)
		}
	}
	r.step(10 * time.Millisecond) // the stream's last frames
	r.step(10 * time.Millisecond) // a quiet line
	r.dev.Receive([][]byte{frame(nicMAC, 100, 0)})
	r.step(frameTime)
	if got := r.dev.Read32(regs.ITR); got != 0 {
		t.Errorf("ITR %d after the line was quiet, want 0", got)
	}
	if r.drv.Config().AdaptiveThrottle {
		cfg.AdaptiveThrottle, cfg.RxIrqThrottle = false, 5580
		if err := r.drv.Configure(cfg); err != nil || r.dev.Read32(regs.ITR) != 5580 {
			t.Errorf("back to a fixed 5580: ITR %d, %v", r.dev.Read32(regs.ITR), err)
		}
	}
	t.Logf("itr_lowest_ms %d, itr_low_ms %d, itr_bulk_ms %d, itr_stream_ms %d, itr_changes %d", c.ITRLowestMS.Load(), c.ITRLowMS.Load(), c.ITRBulkMS.Load(), c.ITRStreamMS.Load(), c.ITRChanges.Load())
}
