package fqcodel

import "testing"

// steady keeps s under load: 64 flows in 4 classes, 256 frames queued at first and as many
// as CoDel lets stay (a frame comes each 39 µs, the queue is over target), every frame 1500
// bytes, ECN-capable every other one.
type steady struct {
	s       *Scheduler
	keys    [64]Key
	h       uint64
	now     int64
	dropped []uint64
}

func newSteady(tb testing.TB) *steady {
	cfg := Defaults
	cfg.Classes = 4
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	st := &steady{s: s, dropped: make([]uint64, 0, 2*cfg.Batch)}
	for i := range st.keys {
		st.keys[i].Src[0], st.keys[i].SPort, st.keys[i].Proto = 10, uint16(i), 6
	}
	for range 256 {
		st.enqueue()
	}
	return st
}

func (st *steady) enqueue() {
	st.h++
	st.now += 39062 // 256 frames in 10 ms
	_, st.dropped = st.s.Enqueue(st.h, 1500, &st.keys[st.h%64], int(st.h/64%4), st.h%2 == 0, st.now, st.dropped[:0])
}

// one is an Enqueue and a Dequeue.
func (st *steady) one() {
	st.enqueue()
	_, _, st.dropped = st.s.Dequeue(st.now, st.dropped[:0])
}

// Enqueue and Dequeue allocate nothing, whatever they drop or mark.
func TestNoAllocations(t *testing.T) {
	st := newSteady(t)
	if n := testing.AllocsPerRun(10000, st.one); n != 0 {
		t.Errorf("%v allocations an Enqueue and Dequeue", n)
	}
	if n := testing.AllocsPerRun(100, func() { st.s.Oldest() }); n != 0 {
		t.Errorf("%v allocations an Oldest", n)
	}
	// Over the limit: batch drops from the fattest flow.
	cfg := Defaults
	cfg.Limit = 100
	s, _ := New(cfg)
	var k Key
	var h uint64
	dropped := make([]uint64, 0, 64)
	if n := testing.AllocsPerRun(10000, func() {
		h++
		k.SPort = uint16(h % 7)
		_, dropped = s.Enqueue(h, 1500, &k, 0, false, int64(h), dropped[:0])
	}); n != 0 {
		t.Errorf("%v allocations an Enqueue over the limit", n)
	}
	if s.Stats().Overlimit == 0 || st.s.Stats().Dropped+st.s.Stats().Marked == 0 {
		t.Errorf("no drops: the test tested nothing: %+v, %+v", s.Stats(), st.s.Stats())
	}
}

// BenchmarkEnqueueDequeue is one Enqueue and one Dequeue in the steady state, CoDel marking
// and dropping.
func BenchmarkEnqueueDequeue(b *testing.B) {
	st := newSteady(b)
	b.ReportAllocs()
	for b.Loop() {
		st.one()
	}
}

// BenchmarkClassify is reading a TCP frame's flow key.
func BenchmarkClassify(b *testing.B) {
	f := frame4(6, 2, 0)
	b.ReportAllocs()
	for b.Loop() {
		Classify(f)
	}
}

// BenchmarkEnqueueOverLimit is an Enqueue that takes the queue over its limit each time, so
// that it drops a batch from the fattest flow: the scan of 1024 buckets, amortised over the
// batch (up to 64 frames).
func BenchmarkEnqueueOverLimit(b *testing.B) {
	cfg := Defaults
	cfg.Limit = 1000
	s, _ := New(cfg)
	var k Key
	var h uint64
	dropped := make([]uint64, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		h++
		k.SPort = uint16(h % 7)
		_, dropped = s.Enqueue(h, 1500, &k, 0, false, int64(h), dropped[:0])
	}
}

// Frames of length 0 (no real frame, but nothing stops a caller) still leave the queue at its
// limit: the fattest flow is one that holds frames.
func TestZeroLengthOverLimit(t *testing.T) {
	cfg := Defaults
	cfg.Limit, cfg.Classes = 4, 3
	s, _ := New(cfg)
	var k Key
	for h := range uint64(20) {
		k.SPort = uint16(h % 3)
		s.Enqueue(h, 0, &k, int(h%3), false, 0, nil)
		if s.Len() > cfg.Limit {
			t.Fatalf("%d frames queued, limit %d", s.Len(), cfg.Limit)
		}
	}
}

func TestNewDefaultsAndLimits(t *testing.T) {
	s, err := New(Config{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults
	want.Seed, want.ECN = 7, false // ECN is as given
	if s.Config() != want || len(s.entries) != want.Limit+1 || len(s.classes) != 1 {
		t.Fatalf("config %+v, %d entries, %d classes", s.Config(), len(s.entries), len(s.classes))
	}
	s.Grow(3)
	if s.Config().Classes != 3 || s.classes[2].flows != nil {
		t.Fatalf("after Grow(3): %d classes, class 2 with %d flows before its first frame", s.Config().Classes, len(s.classes[2].flows))
	}
	s.Enqueue(1, 100, &Key{}, 2, false, 0, nil)
	if len(s.classes[2].flows) != want.Flows || s.classes[1].flows != nil {
		t.Fatalf("after a frame of class 2: %d flows in it, %d in class 1", len(s.classes[2].flows), len(s.classes[1].flows))
	}
	for _, bad := range []Config{{Limit: -1}, {Params: Params{Target: -1}}, {Flows: 1<<16 + 1}, {Limit: 1 << 30}, {Quantum: 1 << 30}} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%+v) took it", bad)
		}
	}
}

// Classes of equal backlog take turns to pay at the limit: sessions of full-sized frames tie
// often, and a scan from class 0 always dropped from the lowest-numbered of them. Each step
// tops up the class with the fewest frames, which ties it with the others at the limit.
func TestOverLimitTiesTakeTurns(t *testing.T) {
	cfg := Defaults
	cfg.Classes, cfg.Limit, cfg.Batch = 3, 5, 1
	s, _ := New(cfg)
	var k Key
	var h uint64
	enqueue := func(c int) []uint64 {
		h++
		k.SPort = uint16(c)
		_, d := s.Enqueue(h, 1500, &k, c, false, 0, nil)
		return d
	}
	for _, c := range []int{0, 0, 1, 1, 2} {
		enqueue(c)
	}
	var drops [3]int
	for range 300 {
		least := 0
		for c := range 3 {
			if s.ClassLen(c) < s.ClassLen(least) {
				least = c
			}
		}
		before := [3]int{s.ClassLen(0), s.ClassLen(1), s.ClassLen(2)}
		enqueue(least)
		before[least]++
		for c := range 3 {
			drops[c] += before[c] - s.ClassLen(c)
		}
	}
	for c, n := range drops {
		if n < 90 {
			t.Errorf("drops per class %v: class %d paid %d of 300", drops, c, n)
		}
	}
}
