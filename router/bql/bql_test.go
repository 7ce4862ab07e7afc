package bql

import "testing"

// run feeds a limit from a producer with frames always waiting (1000 bytes each) to a
// consumer that completes up to rate bytes per poll, polls ms apart in simulated time, and
// returns the limit and how often the consumer found nothing to do.
func run(l *Limit, now *int64, rate uint64, polls int) (starved int) {
	for range polls {
		for l.Avail() >= 0 {
			l.Queued(1000)
		}
		*now += 1e6
		n := min(rate, l.Inflight())
		if n == l.Inflight() {
			starved++
		}
		l.Completed(n, *now)
	}
	return starved
}

// TestLearns: starting at its minimum, the limit grows until a consumer of 8000 bytes a poll
// no longer runs dry, and stays within a few frames of that; when the consumer slows to 2000
// a poll, the slack it leaves makes the limit shrink after the hold time, not before.
func TestLearns(t *testing.T) {
	var now int64 = 1
	l := New(1514, 1<<20, 100e6)
	run(l, &now, 8000, 50)
	if l.Starved == 0 || l.Value() < 8000 {
		t.Fatalf("limit %d after %d starvations, want 8000 or more", l.Value(), l.Starved)
	}
	if s := run(l, &now, 8000, 500); s > 5 {
		t.Errorf("consumer ran dry %d times in 500 polls at limit %d", s, l.Value())
	}
	if l.Value() > 4*8000 {
		t.Errorf("limit %d, far above the 8000 a poll needs", l.Value())
	}
	high, shrunk := l.Value(), l.Shrunk
	run(l, &now, 2000, 50) // 50 ms: less than the hold time
	if l.Shrunk != shrunk {
		t.Errorf("shrunk within the hold time: %d", l.Value())
	}
	run(l, &now, 2000, 500)
	if l.Value() >= high || l.Shrunk == shrunk {
		t.Errorf("limit %d after slack, was %d", l.Value(), high)
	}
}

// TestBounds: the limit stays within its minimum and maximum, and Completed never counts
// more than was queued.
func TestBounds(t *testing.T) {
	var now int64 = 1
	l := New(3000, 10000, 1e6)
	run(l, &now, 1e9, 100)
	if l.Value() != 10000 {
		t.Errorf("limit %d, want the maximum 10000", l.Value())
	}
	l.Completed(1e12, now+1)
	if l.Inflight() != 0 {
		t.Errorf("in flight %d after completing more than queued", l.Inflight())
	}
	run(l, &now, 0, 0)
	for range 100 {
		now += 1e7
		l.Queued(100)
		l.Completed(50, now)
	}
	if l.Value() < 3000 {
		t.Errorf("limit %d below the minimum", l.Value())
	}
}
