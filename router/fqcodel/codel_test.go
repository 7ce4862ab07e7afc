package fqcodel

import (
	"slices"
	"testing"
)

const ms = int64(1e6)

// one is a scheduler of one class and one flow: a single CoDel queue, target 5 ms,
// interval 100 ms, MTU 1514, ECN as asked.
func one(t *testing.T, ecn bool) *Scheduler {
	t.Helper()
	cfg := Defaults
	cfg.Flows, cfg.ECN = 1, ecn
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fill queues handles from..to (1500 bytes each) at time at.
func fill(t *testing.T, s *Scheduler, from, to uint64, at int64, ect bool) {
	t.Helper()
	var k Key
	for h := from; h <= to; h++ {
		if ok, d := s.Enqueue(h, 1500, &k, 0, ect, at, nil); !ok || len(d) != 0 {
			t.Fatalf("enqueue %d: queued %v, dropped %v", h, ok, d)
		}
	}
}

// step dequeues at now and checks the frame, whether it is marked and the drops.
func step(t *testing.T, s *Scheduler, now int64, want uint64, ce bool, drops ...uint64) {
	t.Helper()
	f, ok, d := s.Dequeue(now, nil)
	if !ok || f.Handle != want || f.CE != ce || !slices.Equal(d, drops) {
		t.Fatalf("dequeue at %d ns: got %d (ok %v, CE %v), dropped %v; want %d (CE %v), dropped %v",
			now, f.Handle, ok, f.CE, d, want, ce, drops)
	}
}

func vars(s *Scheduler) *codel { return &s.classes[0].flows[0].cd }

// Control law: interval/sqrt(count), truncated to ns. 100 ms/sqrt(2) = 70.710678 ms,
// /sqrt(3) = 57.735026 ms, /sqrt(4) = 50 ms.
const (
	law2 = 70710678
	law3 = 57735026
	law6 = 40824829
)

func TestControlLaw(t *testing.T) {
	for _, c := range []struct {
		count uint32
		want  int64
	}{{1, 100 * ms}, {2, law2}, {3, law3}, {4, 50 * ms}, {100, 10 * ms}} {
		if got := controlLaw(0, 100*ms, c.count); got != c.want {
			t.Errorf("count %d: %d, want %d", c.count, got, c.want)
		}
	}
}

func TestCoDelBelowTargetNeverDrops(t *testing.T) {
	s := one(t, false)
	// A frame a ms, each sent 5 ms - 1 ns after it came, four queued behind it: for 400 ms,
	// four intervals, CoDel never even notes the queue as above target.
	for i := int64(0); i < 400; i++ {
		if i >= 5 {
			step(t, s, i*ms-1, uint64(i-4), false)
			if v := vars(s); v.above || v.dropping {
				t.Fatalf("at %d ms: above %v dropping %v", i, v.above, v.dropping)
			}
		}
		fill(t, s, uint64(i+1), uint64(i+1), i*ms, false)
	}
}

// A standing queue: sojourn at target or above for an interval starts the dropping state;
// drops then come at interval/sqrt(count), several in one dequeue when it is late.
func TestCoDelEntersDroppingAndFollowsControlLaw(t *testing.T) {
	s := one(t, false)
	fill(t, s, 1, 40, 0, false)
	step(t, s, 5*ms, 1, false) // sojourn exactly target: above from now on, till 105 ms
	if v := vars(s); !v.above || v.firstAbove != 105*ms || v.dropping {
		t.Fatalf("after the first frame: %+v", *v)
	}
	step(t, s, 105*ms-1, 2, false) // not yet an interval
	step(t, s, 105*ms, 4, false, 3)
	if v := vars(s); !v.dropping || v.count != 1 || v.lastCount != 1 || v.dropNext != 205*ms {
		t.Fatalf("entering: %+v", *v)
	}
	step(t, s, 205*ms-1, 5, false)
	step(t, s, 205*ms, 7, false, 6) // count 2
	if v := vars(s); v.count != 2 || v.dropNext != 205*ms+law2 {
		t.Fatalf("second drop: %+v", *v)
	}
	// Late: at 300 ms the drops due at 275.710678 ms (count 3) and at +57.735026 ms... only
	// the first is due; at 400 ms two are.
	step(t, s, 300*ms, 9, false, 8)
	if v := vars(s); v.count != 3 || v.dropNext != 205*ms+law2+law3 {
		t.Fatalf("third drop: %+v", *v)
	}
	// Due: 333.445704 (count 4, next +50 ms = 383.445704), 383.445704 (count 5, next
	// +44.72136 ms = 428.167064).
	step(t, s, 400*ms, 12, false, 10, 11)
	if v := vars(s); v.count != 5 || v.dropNext != 205*ms+law2+law3+50*ms+44721359 {
		t.Fatalf("fourth and fifth drops: %+v", *v)
	}
	if st := s.Stats(); st.Dropped != 5 || st.Marked != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// The dropping state ends when a frame's sojourn is below target, or when no more than one
// MTU is left queued; either also forgets when the queue went above target.
func TestCoDelLeavesDropping(t *testing.T) {
	for _, below := range []string{"target", "mtu"} {
		t.Run(below, func(t *testing.T) {
			s := one(t, false)
			fill(t, s, 1, 10, 0, false)
			step(t, s, 5*ms, 1, false)
			step(t, s, 105*ms, 3, false, 2)
			if below == "target" {
				fill(t, s, 11, 12, 150*ms, false)
				for h := uint64(4); h <= 10; h++ { // old frames, before the next drop
					step(t, s, 150*ms, h, false)
				}
				step(t, s, 155*ms-1, 11, false)
			} else {
				for h := uint64(4); h <= 9; h++ {
					step(t, s, 150*ms, h, false)
				}
				step(t, s, 150*ms, 10, false) // sojourn 150 ms, but nothing queued behind it
			}
			if v := vars(s); v.dropping || v.above {
				t.Fatalf("still %+v", *v)
			}
		})
	}
}

// Re-entering the dropping state within 16 intervals of the last one's next drop resumes
// at count - lastCount, the drops the last state added; later, or when that added at most
// one, it starts at 1.
func TestCoDelCountCarriesOver(t *testing.T) {
	for _, c := range []struct {
		name      string
		again     int64 // when the second standing queue starts
		wantCount uint32
	}{
		{"within 16 intervals", 400 * ms, 2},
		// Re-entering at again+110 ms, against the last next drop at 205 ms+law2+law3:
		{"1 ns less than 16 intervals", 205*ms + law2 + law3 + 1600*ms - 110*ms - 1, 2},
		{"16 intervals", 205*ms + law2 + law3 + 1600*ms - 110*ms, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := one(t, false)
			fill(t, s, 1, 40, 0, false)
			step(t, s, 5*ms, 1, false)
			step(t, s, 105*ms, 3, false, 2)      // count 1, lastCount 1
			step(t, s, 205*ms, 5, false, 4)      // 2
			step(t, s, 205*ms+law2, 7, false, 6) // 3, next at 205+law2+law3
			for h := uint64(8); h <= 40; h++ {   // drain before it: the last leaves
				step(t, s, 205*ms+law2+1, h, false) // (nothing behind it)
			}
			if v := vars(s); v.dropping || v.count != 3 || v.lastCount != 1 {
				t.Fatalf("after the first state: %+v", *v)
			}
			fill(t, s, 41, 50, c.again, false)
			step(t, s, c.again+10*ms, 41, false)
			step(t, s, c.again+110*ms, 43, false, 42)
			v := vars(s)
			if !v.dropping || v.count != c.wantCount || v.lastCount != c.wantCount ||
				v.dropNext != controlLaw(c.again+110*ms, 100*ms, c.wantCount) {
				t.Fatalf("re-entered: %+v, want count %d", *v, c.wantCount)
			}
		})
	}
}

// With ECN, an ECN-capable frame CoDel would drop is marked CE and sent, one per dequeue,
// on the same schedule; one that is not capable is dropped as before.
func TestCoDelMarksECT(t *testing.T) {
	s := one(t, true)
	fill(t, s, 1, 6, 0, true)
	fill(t, s, 7, 7, 0, false)
	fill(t, s, 8, 10, 0, true)
	step(t, s, 5*ms, 1, false)
	step(t, s, 105*ms, 2, true) // marked, entering with count 1
	if v := vars(s); !v.dropping || v.count != 1 || v.dropNext != 205*ms {
		t.Fatalf("entering: %+v", *v)
	}
	step(t, s, 205*ms, 3, true)
	// Late by two drops, but a mark ends the dequeue: one mark, the next still due.
	step(t, s, 400*ms, 4, true)
	v := vars(s)
	if v.count != 3 || v.dropNext != 205*ms+law2+law3 {
		t.Fatalf("third: %+v", *v)
	}
	v.dropNext = 1 << 62 // none due
	step(t, s, 400*ms, 5, false)
	v.dropNext = 0
	step(t, s, 400*ms, 6, true) // count 4, next at 50 ms: due
	// Not capable: dropped (count 5, next at 94.72136 ms: due); the next is marked (count 6).
	step(t, s, 400*ms, 8, true, 7)
	if v.count != 6 || v.dropNext != 50*ms+44721359+law6 {
		t.Fatalf("after the drop: %+v", *v)
	}
	if st := s.Stats(); st.Marked != 5 || st.Dropped != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// An empty queue ends the dropping state and forgets the time above target.
func TestCoDelEmptyResets(t *testing.T) {
	cfg := Defaults
	cfg.Flows, cfg.MTU = 1, 1 // so that the last frame but one may be dropped
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 1, 3, 0, false)
	step(t, s, 5*ms, 1, false)
	step(t, s, 105*ms, 3, false, 2)
	if v := vars(s); !v.dropping {
		t.Fatalf("not dropping: %+v", *v)
	}
	if _, ok, _ := s.Dequeue(106*ms, nil); ok {
		t.Fatal("dequeued from an empty queue")
	}
	if v := vars(s); v.dropping || v.above {
		t.Fatalf("after empty: %+v", *v)
	}
}
