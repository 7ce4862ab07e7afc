package ipxe_test

import (
	"testing"
	"time"

	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/drivers/ipxe"
)

// TestRxPollOnTx: at a fixed ITR of 1.43 ms, frames in the RX ring when the router hands the
// driver a batch are delivered by Transmit, without an interrupt, in one burst (one signal,
// one RDT write); the interrupt that follows takes only what came after, so nothing arrives
// twice; a Transmit that finds the ring empty signals nothing. With rx_poll_on_tx="no", or
// at the bulk class's ITR of 250 µs (the interrupt comes soon anyway), the frames wait for the
// interrupt.
func TestRxPollOnTx(t *testing.T) {
	for _, tc := range []struct {
		itr         uint32
		on, polling bool
	}{{5580, true, true}, {5580, false, false}, {977, true, false}} {
		cfg := ipxe.DefaultConfig()
		cfg.RxIrqThrottle, cfg.RxPollOnTx = tc.itr, tc.on
		poll := tc.polling
		r := newRig(t, "82574L", cfg)
		r.waitLink(t)
		for range 4 { // the link's interrupts are over
			r.step(2 * time.Millisecond)
		}
		c := r.drv.Counters()
		irqs, bursts, rdt := c.Interrupts.Load(), r.up.bursts, c.RDTWrites.Load()

		in := [][]byte{frame(nicMAC, 60, 1), frame(nicMAC, 1514, 2), frame(nicMAC, 60, 3)}
		r.dev.Receive(in[:2])
		r.clock.Advance(50 * time.Microsecond)
		r.up.tx = append(r.up.tx, frame(farMAC, 60, 100)) // the guest's acknowledgement
		r.drv.Transmit()
		if c.Interrupts.Load() != irqs {
			t.Fatalf("poll %v: the driver ran its interrupt handler", poll)
		}
		if poll {
			sameFrames(t, "after Transmit", r.up.rx, in[:2])
			if r.up.bursts != bursts+1 || c.RDTWrites.Load() != rdt+1 || c.RXBursts.Load() != uint64(r.up.bursts) || c.RXPollFrames.Load() != 2 {
				t.Errorf("one poll of 2 frames: %d signals, %d RDT writes, rx_bursts %d, rx_poll_frames %d; want 1, 1, %d, 2",
					r.up.bursts-bursts, c.RDTWrites.Load()-rdt, c.RXBursts.Load(), r.up.bursts, c.RXPollFrames.Load())
			}
			r.drv.Transmit() // the router's next batch, nothing received meanwhile
			if r.up.bursts != bursts+1 || c.RDTWrites.Load() != rdt+1 {
				t.Errorf("a Transmit that found the RX ring empty: %d signals, %d RDT writes in all, want 1 and 1",
					r.up.bursts-bursts, c.RDTWrites.Load()-rdt)
			}
		} else if len(r.up.rx) != 0 || c.RXPollFrames.Load() != 0 {
			t.Fatalf("%+v: %d frames delivered by Transmit (rx_poll_frames %d)", tc, len(r.up.rx), c.RXPollFrames.Load())
		}
		r.dev.Receive(in[2:])
		for range 2 {
			r.step(time.Millisecond)
		}
		if c.Interrupts.Load() == irqs {
			t.Fatalf("poll %v: no interrupt in 2 ms", poll)
		}
		sameFrames(t, "after the interrupt", r.up.rx, in)
		want := 1 // the interrupt's burst
		if poll {
			want = 2
		}
		if r.up.bursts-bursts != want || c.RDTWrites.Load()-rdt != uint64(want) || c.RXFrames.Load() != 3 {
			t.Errorf("poll %v: %d signals, %d RDT writes, rx_frames %d; want %d, %d, 3",
				poll, r.up.bursts-bursts, c.RDTWrites.Load()-rdt, c.RXFrames.Load(), want, want)
		}
		if poll && c.RXPollFrames.Load() != 2 {
			t.Errorf("rx_poll_frames %d, want 2 (the interrupt's frame is not the poll's)", c.RXPollFrames.Load())
		}
	}
}

// streamResult is what a received stream with the guest's acknowledgements did to the driver.
type streamResult struct {
	frames, delivered, polled uint64
	irqs, bursts, rdtWrites   uint64
	streamMS, allMS           uint64 // adaptive moderation's time in the stream class, in all
	itr                       uint32 // at the end
}

// receiveStream drives the model's wire at 1 Gbit/s into the driver (adaptive moderation) for
// dur of model time, a full frame every frame time, while the router hands the driver a
// batch of one acknowledgement every ackEvery frames; the driver services each interrupt the
// moment it is raised.
func receiveStream(t *testing.T, poll bool, dur time.Duration, ackEvery int) streamResult {
	t.Helper()
	cfg := ipxe.DefaultConfig()
	cfg.AdaptiveThrottle, cfg.RxPollOnTx = true, poll
	l := newLineRig(t, cfg)
	up := &fakeUplink{}
	l.drv.SetUplink(up)
	c := l.drv.Counters()
	irqs0, bursts0, rdt0 := c.Interrupts.Load(), c.RXBursts.Load(), c.RDTWrites.Load()
	ms0 := c.ITRLowestMS.Load() + c.ITRLowMS.Load() + c.ITRBulkMS.Load() + c.ITRStreamMS.Load()
	rx, ack := [][]byte{frame(nicMAC, 1514, 2)}, frame(farMAC, 66, 1)
	var sent uint64
	start := l.clock.Now()
	for next := start; l.clock.Now() < start+dur; {
		if l.clock.Now() >= next {
			sent += uint64(l.dev.Receive(rx))
			next += frameTime
			if sent%uint64(ackEvery) == 0 {
				up.tx = append(up.tx, ack)
				l.drv.Transmit()
			}
		}
		due, ok := l.dev.Poll()
		select {
		case <-l.irq:
			l.drv.HandleInterrupt()
			continue
		default:
		}
		if !ok || due > next {
			due = next
		}
		l.clock.Advance(max(due-l.clock.Now(), 0))
	}
	for range 4 { // the last interrupt takes what is left
		l.step(2 * time.Millisecond)
	}
	all := c.ITRLowestMS.Load() + c.ITRLowMS.Load() + c.ITRBulkMS.Load() + c.ITRStreamMS.Load() - ms0
	return streamResult{frames: sent, delivered: uint64(len(up.rx)), polled: c.RXPollFrames.Load(),
		irqs: c.Interrupts.Load() - irqs0, bursts: c.RXBursts.Load() - bursts0, rdtWrites: c.RDTWrites.Load() - rdt0,
		streamMS: c.ITRStreamMS.Load(), allMS: all, itr: l.dev.Read32(regs.ITR)}
}

// TestRxPollKeepsStreamClass: the frames the polls take count toward moderation's work, so a
// received stream whose frames the guest's acknowledgements take almost all of still moves
// moderation to the stream class (its interrupt rate), as without polling; every frame is
// delivered once; a signal and an RDT write per pass, a pass per acknowledgement batch at most.
func TestRxPollKeepsStreamClass(t *testing.T) {
	const dur, ackEvery = 200 * time.Millisecond, 8
	for _, poll := range []bool{false, true} {
		r := receiveStream(t, poll, dur, ackEvery)
		t.Logf("rx_poll_on_tx %v: %d frames, %d polled; %d interrupts, %d bursts (%.1f frames each), %d RDT writes; stream class %d of %d ms, ITR %d at the end",
			poll, r.delivered, r.polled, r.irqs, r.bursts, float64(r.delivered)/float64(r.bursts), r.rdtWrites, r.streamMS, r.allMS, r.itr)
		if r.delivered != r.frames {
			t.Errorf("poll %v: %d frames delivered, %d received", poll, r.delivered, r.frames)
		}
		if r.itr != ipxe.StreamLatency.ITR() || r.streamMS*2 < r.allMS {
			t.Errorf("poll %v: ITR %d at the end, stream class %d of %d ms: want the stream class most of the time", poll, r.itr, r.streamMS, r.allMS)
		}
		if r.rdtWrites != r.bursts || r.bursts > r.irqs+r.frames/ackEvery {
			t.Errorf("poll %v: %d RDT writes and %d bursts for %d interrupts and %d acknowledgement batches", poll, r.rdtWrites, r.bursts, r.irqs, r.frames/ackEvery)
		}
		if poll && r.polled*2 < r.frames {
			t.Errorf("polls took %d of %d frames, want most", r.polled, r.frames)
		}
	}
}
