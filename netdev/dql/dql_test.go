package dql

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

const (
	testFrame = 1500
	testMax   = 1 << 20
	testHold  = time.Second
)

// fill queues frames of size bytes while the limit admits them, as the driver does.
func (q *Limit) fill(size uint32) {
	for q.Avail() >= 0 {
		q.Queued(size)
	}
}

// TestDQLStarvationGrows: a queue the limit held back that then ran empty grows the limit
// by what the interval sent, until the queue no longer runs dry between completions.
func TestDQLStarvationGrows(t *testing.T) {
	q := New(0, testMax, testHold, 0)
	q.Queued(testFrame) // a limit of 0 still admits one frame
	if q.Avail() >= 0 {
		t.Fatalf("Avail %d after a frame over a limit of 0, want negative", q.Avail())
	}
	q.Completed(testFrame, time.Millisecond)
	if q.Limit() != testFrame {
		t.Fatalf("limit %d after one starved completion, want %d", q.Limit(), testFrame)
	}
	// The wire drains 15000 bytes between completions: the limit grows while the queue runs
	// empty, then holds once a completion leaves bytes in flight.
	const perInterval = 10 * testFrame
	now, prev := time.Millisecond, q.Limit()
	for range 50 {
		q.fill(testFrame)
		now += 100 * time.Microsecond
		q.Completed(min(perInterval, q.InFlight()), now)
		if q.Limit() < prev {
			t.Fatalf("limit shrank from %d to %d within the hold time", prev, q.Limit())
		}
		prev = q.Limit()
	}
	if q.Limit() < perInterval || q.Limit() > 4*perInterval {
		t.Errorf("limit %d, want about what the wire drains per interval (%d)", q.Limit(), perInterval)
	}
}

// TestDQLSlackShrinks: a queue busy through every interval with far more in flight than an
// interval completes keeps its limit for the hold time, then loses the least slack seen.
func TestDQLSlackShrinks(t *testing.T) {
	q := New(0, testMax, testHold, 0)
	// Starve it up to a large limit: complete everything each time.
	now := time.Duration(0)
	for q.Limit() < 200_000 {
		q.fill(testFrame)
		now += time.Millisecond
		q.Completed(q.InFlight(), now)
	}
	big := q.Limit()
	// Now busy: each interval completes 10 frames and the queue is refilled.
	const perInterval = 10 * testFrame
	start := now
	for now-start <= testHold {
		q.fill(testFrame)
		now += 10 * time.Millisecond
		q.Completed(perInterval, now)
		if now-start <= testHold && q.Limit() != big {
			t.Fatalf("limit moved from %d to %d %v into the hold time", big, q.Limit(), now-start)
		}
	}
	if q.Limit() >= big/2 {
		t.Fatalf("limit %d after slack persisted for the hold time, want well below %d", q.Limit(), big)
	}
	if q.Limit() < 2*perInterval-testFrame {
		t.Errorf("limit %d: shrank below twice an interval's completions (%d)", q.Limit(), 2*perInterval)
	}
}

// TestDQLBounds: the limit starts at min and stays within [min, max] whichever way it is
// pushed.
func TestDQLBounds(t *testing.T) {
	const lo, hi = 4000, 10000
	q := New(lo, hi, testHold, 0)
	if q.Limit() != lo {
		t.Fatalf("limit %d at start, want min %d", q.Limit(), lo)
	}
	now := time.Duration(0)
	for range 20 { // starve it: it would grow without end
		q.fill(testFrame)
		now += time.Millisecond
		q.Completed(q.InFlight(), now)
	}
	if q.Limit() != hi {
		t.Errorf("limit %d after starving, want max %d", q.Limit(), hi)
	}
	for range 500 { // busy with slack for seconds: it would shrink to nothing
		q.fill(60)
		now += 10 * time.Millisecond
		q.Completed(60, now)
	}
	if q.Limit() != lo {
		t.Errorf("limit %d after persistent slack, want min %d", q.Limit(), lo)
	}
	q.Reset(now)
	if q.Limit() != lo || q.InFlight() != 0 {
		t.Errorf("after reset: limit %d, in flight %d; want %d, 0", q.Limit(), q.InFlight(), lo)
	}
}

// TestDQLCap: a limit the completions would grow without end stops at the cap (Linux's
// limit_max); a cap lowered under a grown limit takes it down at once, and admits nothing
// more until what is in flight falls below it; raised, the limit grows again.
func TestDQLCap(t *testing.T) {
	const hi = 100 * testFrame
	q := New(0, hi, testHold, 0)
	now := time.Duration(0)
	starve := func(n int) {
		for range n { // complete everything each time: the queue starves and the limit grows
			q.fill(testFrame)
			now += time.Millisecond
			q.Completed(q.InFlight(), now)
		}
	}
	starve(20)
	if q.Limit() != hi {
		t.Fatalf("limit %d after starving, want max %d", q.Limit(), hi)
	}
	q.fill(testFrame) // hi + one frame in flight
	const capped = 10 * testFrame
	q.SetMax(capped)
	if q.Limit() != capped || q.Max() != capped {
		t.Fatalf("limit %d, max %d after SetMax(%d)", q.Limit(), q.Max(), capped)
	}
	if q.Avail() >= 0 {
		t.Fatalf("Avail %d with %d in flight over a cap of %d, want negative", q.Avail(), q.InFlight(), capped)
	}
	now += time.Millisecond
	q.Completed(q.InFlight()-capped/2, now)
	if q.Avail() < 0 {
		t.Fatalf("Avail %d with %d in flight under a cap of %d", q.Avail(), q.InFlight(), capped)
	}
	starve(20)
	if q.Limit() != capped {
		t.Errorf("limit %d after starving under the cap, want %d", q.Limit(), capped)
	}
	for range 100 { // in flight stays within the cap plus a frame
		q.fill(testFrame)
		if q.InFlight() > capped+testFrame {
			t.Fatalf("%d in flight, over the cap %d plus a frame", q.InFlight(), capped)
		}
		now += 100 * time.Microsecond
		q.Completed(q.InFlight()/2, now)
	}
	q.SetMax(hi)
	starve(20)
	if q.Limit() != hi {
		t.Errorf("limit %d after raising the cap and starving, want %d", q.Limit(), hi)
	}
	q = New(2*testFrame, hi, testHold, now)
	if q.SetMax(testFrame); q.Max() != 2*testFrame || q.Limit() != 2*testFrame {
		t.Errorf("a cap below min: max %d, limit %d, want min %d", q.Max(), q.Limit(), 2*testFrame)
	}
}

// TestDQLOvercompletion: completing more than is in flight is refused as an error and clamped,
// where Linux stops the kernel.
func TestDQLOvercompletion(t *testing.T) {
	q := New(0, testMax, testHold, 0)
	q.Queued(testFrame)
	if q.Completed(2*testFrame, time.Millisecond) {
		t.Error("completing twice what was in flight was accepted")
	}
	if q.InFlight() != 0 || q.Avail() != int(q.Limit()) {
		t.Errorf("in flight %d, Avail %d after the clamp; want 0, %d", q.InFlight(), q.Avail(), q.Limit())
	}
	if !q.Completed(0, 2*time.Millisecond) {
		t.Error("completing nothing of nothing was refused")
	}
	q.Queued(testFrame)
	if !q.Completed(testFrame, 3*time.Millisecond) || q.InFlight() != 0 {
		t.Errorf("a proper completion after the clamp: in flight %d", q.InFlight())
	}
}

// TestDQLProperties drives the limit with random frames, completions (some of more than is in
// flight) and times: the limit stays within [min, max], a frame is queued only while Avail is
// not negative so in flight never exceeds the limit plus one frame, and totals that wrap
// change nothing.
func TestDQLProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lo := rapid.Uint32Range(0, 64<<10).Draw(t, "min")
		hi := rapid.Uint32Range(lo, 1<<20).Draw(t, "max")
		hold := time.Duration(rapid.Int64Range(0, int64(2*time.Second)).Draw(t, "hold"))
		q := New(lo, hi, hold, 0)
		// w runs the same with totals just short of wrapping.
		w := New(lo, hi, hold, 0)
		w.queued, w.completed, w.prevQueued = math.MaxUint32-5000, math.MaxUint32-5000, math.MaxUint32-5000
		now := time.Duration(0)
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0: // the driver fills the ring
				for range rapid.IntRange(0, 64).Draw(t, "frames") {
					if q.Avail() < 0 {
						break
					}
					size := rapid.Uint32Range(60, 2048).Draw(t, "size")
					q.Queued(size)
					w.Queued(size)
					if q.InFlight() > q.Limit()+size {
						t.Fatalf("in flight %d after a frame of %d, limit %d", q.InFlight(), size, q.Limit())
					}
				}
			case 1: // a completion
				bytes := rapid.Uint32Range(0, q.InFlight()+q.InFlight()/8).Draw(t, "completed")
				want := bytes <= q.InFlight()
				if ok, wok := q.Completed(bytes, now), w.Completed(bytes, now); ok != want || wok != want {
					t.Fatalf("completion of %d: ok %v, with totals that wrap %v; want %v", bytes, ok, wok, want)
				}
			case 2:
				now += time.Duration(rapid.Int64Range(0, int64(hold)).Draw(t, "dt"))
			}
			if q.Limit() < lo || q.Limit() > hi {
				t.Fatalf("limit %d outside [%d, %d]", q.Limit(), lo, hi)
			}
			if q.Limit() != w.Limit() || q.InFlight() != w.InFlight() {
				t.Fatalf("limit %d, in flight %d; with totals that wrap %d, %d", q.Limit(), q.InFlight(), w.Limit(), w.InFlight())
			}
		}
	})
}

// A limit_max of 0 leaves the natural bound; one above it too; one below it is the bound,
// and New raises a bound below min to min.
func TestCapped(t *testing.T) {
	for _, c := range []struct{ natural, limitMax, want uint32 }{{1000, 0, 1000}, {1000, 2000, 1000}, {1000, 400, 400}} {
		if got := Capped(c.natural, c.limitMax); got != c.want {
			t.Errorf("Capped(%d, %d) = %d, want %d", c.natural, c.limitMax, got, c.want)
		}
	}
	if q := New(1514, 100, time.Second, 0); q.Max() != 1514 {
		t.Errorf("New(1514, 100): max %d, want 1514", q.Max())
	}
}
