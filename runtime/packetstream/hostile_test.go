package packetstream

import (
	"math"
	"testing"
)

// Descriptors and indices a hostile peer can write, each checked and counted, never followed.
func TestHostileDescriptors(t *testing.T) {
	cfg := Config{QueueSize: 8, BulkSize: 8 * BlockSize}
	src, snk, err := NewHeapStream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer snk.Close()
	bulk := uint64(cfg.bulkStart())
	q := newRing(snk.reg, cfg.submitQueue())
	// A hostile source writes descriptors straight into the submit queue. Offsets and sizes
	// are 32 bits in shared memory; the sink adds them in 64 bits, so no sum wraps.
	bad := []struct{ off, size uint32 }{
		{0, 64},               // the queue headers
		{uint32(bulk) - 1, 2}, // straddles the bulk start
		{uint32(bulk) + uint32(cfg.BulkSize) - 1, 2}, // straddles the end
		{math.MaxUint32 - 10, 64},                    // the sum passes 2^32 (wraps in 32-bit arithmetic)
		{uint32(bulk), math.MaxUint32},               // a size that passes 2^32 from inside the buffer
		{uint32(bulk), 0},                            // no frame
		{math.MaxUint32, 1},                          // far past the region
	}
	for i, d := range bad {
		q.putDesc(uint32(i), uint64(d.off), d.size, 0, 0)
	}
	q.head.Store(uint32(len(bad)))
	for i := range bad {
		p, ok := snk.TryGet()
		if !ok {
			t.Fatalf("descriptor %d not delivered", i)
		}
		if snk.Payload(p) != nil {
			t.Fatalf("descriptor %+v: payload returned", bad[i])
		}
		snk.TryAck(p)
	}
	snk.Wakeup()
	if got := snk.Counters().Invalid.Load(); got != uint64(len(bad)) {
		t.Fatalf("sink counted %d invalid, want %d", got, len(bad))
	}
	// The honest source gets those acknowledgements back and recognises none as its own.
	if p, ok := src.GetAcked(); ok {
		t.Fatalf("source took back %+v, which it never sent", p)
	}
	src.Wakeup()
	if got := src.Counters().Invalid.Load(); got != uint64(len(bad)) {
		t.Fatalf("source counted %d invalid acknowledgements, want %d", got, len(bad))
	}

	// A head that claims more entries than the queue holds reads as empty, counted once.
	q.head.Store(uint32(len(bad)) + 1000)
	for i := 0; i < 3; i++ {
		if _, ok := snk.TryGet(); ok {
			t.Fatal("got a packet past an impossible head")
		}
	}
	snk.Wakeup()
	if got := snk.Counters().Invalid.Load(); got != uint64(len(bad))+1 {
		t.Fatalf("impossible head counted %d times", got-uint64(len(bad)))
	}

	// A hostile sink acknowledges a packet twice: the second is invalid.
	src, snk, err = NewHeapStream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer snk.Close()
	p, _ := src.Alloc(100)
	src.TrySubmit(p)
	src.Wakeup()
	got, ok := snk.TryGet()
	if !ok || got.Offset != p.Offset {
		t.Fatalf("honest frame not delivered: %+v", got)
	}
	snk.TryAck(got)
	snk.TryAck(got)
	snk.Wakeup()
	if a, ok := src.GetAcked(); !ok || a.Offset != p.Offset {
		t.Fatal("first acknowledgement lost")
	}
	if _, ok := src.GetAcked(); ok {
		t.Fatal("second acknowledgement of the same packet accepted")
	}
	src.Wakeup()
	if src.InFlight() != 0 || src.Counters().Invalid.Load() != 1 {
		t.Fatalf("in flight %d, invalid %d", src.InFlight(), src.Counters().Invalid.Load())
	}
}

// The batch calls check what a hostile peer writes as the single ones do.
func TestHostileBatch(t *testing.T) {
	cfg := Config{QueueSize: 8, BulkSize: 8 * BlockSize}
	src, snk, err := NewHeapStream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer snk.Close()
	bulk := uint64(cfg.bulkStart())
	q := newRing(snk.reg, cfg.submitQueue())
	q.putDesc(0, 0, 64, 0, 0)                          // the queue headers
	q.putDesc(1, bulk+uint64(cfg.BulkSize)-1, 2, 0, 0) // straddles the end
	q.putDesc(2, bulk, BlockSize, 0, 0)                // in the bulk buffer
	q.putDesc(3, math.MaxUint32, math.MaxUint32, 0, 0) // the sum overflows 32 bits
	q.head.Store(4)
	pks, frames := make([]Packet, 8), make([][]byte, 8)
	if k := snk.TryGetBatch(pks, frames); k != 4 {
		t.Fatalf("got %d descriptors, want 4", k)
	}
	for i, f := range frames[:4] {
		if (f != nil) != (i == 2) || (f != nil && len(f) != BlockSize) {
			t.Fatalf("descriptor %d: payload of %d bytes", i, len(f))
		}
	}
	if k := snk.TryAckBatch(pks[:4]); k != 4 {
		t.Fatalf("acknowledged %d of 4", k)
	}
	snk.Wakeup()
	if got := snk.Counters().Invalid.Load(); got != 3 {
		t.Fatalf("sink counted %d invalid, want 3", got)
	}
	if k := src.ReleaseAcked(); k != 0 {
		t.Fatalf("source released %d packets it never sent", k)
	}
	src.Wakeup()
	if got := src.Counters().Invalid.Load(); got != 4 {
		t.Fatalf("source counted %d invalid acknowledgements, want 4", got)
	}
	// An impossible head reads as nothing new, counted once.
	q.head.Store(4 + 1000)
	for range 3 {
		if k := snk.TryGetBatch(pks, frames); k != 0 {
			t.Fatalf("got %d packets past an impossible head", k)
		}
	}
	snk.Wakeup()
	if got := snk.Counters().Invalid.Load(); got != 4 {
		t.Fatalf("impossible head counted %d times", got-3)
	}
	// An impossible ack tail (the source's view of it) leaves no room to get or acknowledge.
	a := newRing(snk.reg, cfg.ackQueue())
	snk.ack.tail = snk.ack.head - uint32(cfg.QueueSize) // the view is full: the tail is read
	a.tail.Store(snk.ack.head + 1)
	q.head.Store(4)
	if k := snk.TryGetBatch(pks, frames); k != 0 {
		t.Fatalf("got %d packets with an impossible ack tail", k)
	}
}
