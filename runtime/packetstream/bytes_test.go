package packetstream

import (
	"errors"
	"testing"

	"github.com/nicstack/nicstack/netdev"
)

// TestQueueBytes: with a byte bound the queue refuses a frame that would take the bytes in
// flight over it, though descriptors and buffer have room, and takes it again once the
// acknowledged frames are collected; a frame larger than the bound goes alone; the eager
// Submit says ErrExhausted rather than wait for acknowledgements only the caller collects;
// and the bounded path allocates nothing.
func TestQueueBytes(t *testing.T) {
	src, snk, err := NewHeapStream(Config{QueueSize: 64, BulkSize: 64 * BlockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer snk.Close()
	src.SetQueueBytes(3000)
	for k := range 3 {
		b, ok := src.Reserve(1000)
		if !ok {
			t.Fatalf("frame %d refused with %d bytes in flight", k, src.InFlightBytes())
		}
		src.Commit(len(b), netdev.Offload{})
	}
	if _, ok := src.Reserve(1); ok || src.CanSubmit() {
		t.Fatal("a frame accepted over the bound")
	}
	p, err := src.Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	if src.TrySubmit(p) {
		t.Fatal("TrySubmit accepted over the bound")
	}
	if err := src.Submit(p); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Submit over the bound: %v", err)
	}
	src.Wakeup()
	for {
		q, ok := snk.TryGet()
		if !ok {
			break
		}
		snk.TryAck(q)
	}
	snk.Wakeup()
	if n := src.ReleaseAcked(); n != 3 || src.InFlightBytes() != 0 {
		t.Fatalf("released %d, %d bytes in flight", n, src.InFlightBytes())
	}
	if !src.TrySubmit(p) {
		t.Fatal("refused with nothing in flight")
	}
	src.Wakeup()
	q, _ := snk.TryGet()
	snk.TryAck(q)
	snk.Wakeup()
	src.ReleaseAcked()
	big, ok := src.Reserve(4000)
	if !ok {
		t.Fatal("a frame larger than the bound refused with nothing in flight")
	}
	src.Commit(len(big), netdev.Offload{})
	src.Wakeup()
	q, _ = snk.TryGet()
	snk.TryAck(q)
	snk.Wakeup()
	src.ReleaseAcked()
	allocs := testing.AllocsPerRun(100, func() {
		for range 3 {
			b, _ := src.Reserve(1000)
			src.Commit(len(b), netdev.Offload{})
		}
		src.Wakeup()
		for k := 0; k < 3; k++ {
			q, _ := snk.TryGet()
			snk.TryAck(q)
		}
		snk.Wakeup()
		src.ReleaseAcked()
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per round", allocs)
	}
}

// The default bound: 10 ms at 1 Gbit/s for Genode's default buffer and a TAP's 12 MiB one,
// the whole buffer when it is smaller.
func TestDefaultQueueBytes(t *testing.T) {
	for _, c := range []struct{ bulk, want int }{
		{DefaultConfig().BulkSize, 1250000},
		{12 << 20, 1250000},
		{64 * BlockSize, 64 * BlockSize},
	} {
		if got := (Config{QueueSize: 1024, BulkSize: c.bulk}).DefaultQueueBytes(); got != c.want {
			t.Errorf("buffer %d: %d, want %d", c.bulk, got, c.want)
		}
	}
}
