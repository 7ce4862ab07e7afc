package packetstream

import (
	"encoding/binary"
	"testing"

	"github.com/nicstack/nicstack/netdev"
)

// pump moves n frames of the given sizes through src and snk in one goroutine, batching try
// calls, and checks every frame arrives intact and in order.
func pump(t *testing.T, src *Source, snk *Sink, n int, size func(i int) int, batch int) {
	t.Helper()
	sent, got := 0, 0
	for steps := 0; got < n; steps++ {
		if steps > 100*n+1000 {
			t.Fatalf("no progress: sent %d, got %d", sent, got)
		}
		for p, ok := src.GetAcked(); ok; p, ok = src.GetAcked() {
			src.Release(p)
		}
		for k := 0; k < batch && sent < n && src.CanSubmit(); k++ {
			p, err := src.Alloc(size(sent))
			if err == ErrExhausted {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			fill(src.Payload(p), sent)
			if !src.TrySubmit(p) {
				t.Fatal("TrySubmit failed after CanSubmit")
			}
			sent++
		}
		src.Wakeup()
		for k := 0; k < batch && snk.CanAck(); k++ {
			p, ok := snk.TryGet()
			if !ok {
				break
			}
			b := snk.Payload(p)
			if len(b) != size(got) || !check(b, got) {
				t.Fatalf("frame %d: bad payload (len %d, want %d)", got, len(b), size(got))
			}
			got++
			snk.TryAck(p)
		}
		snk.Wakeup()
	}
}

// fill writes frame i's pattern: its number, then bytes derived from it.
func fill(b []byte, i int) {
	for j := range b {
		b[j] = byte(i*7 + j)
	}
	if len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, uint64(i))
	}
}

func check(b []byte, i int) bool {
	if len(b) >= 8 && binary.LittleEndian.Uint64(b) != uint64(i) {
		return false
	}
	for j := 8; j < len(b); j++ {
		if b[j] != byte(i*7+j) {
			return false
		}
	}
	return true
}

func TestHeapStream(t *testing.T) {
	src, snk, err := NewHeapStream(Config{QueueSize: 8, BulkSize: 8 * BlockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer snk.Close()
	pump(t, src, snk, 2000, func(i int) int { return 1 + (i*37)%3000 }, 5)
	if src.Counters().Frames.Load() != 2000 || snk.Counters().Frames.Load() != 2000 {
		t.Fatalf("counters: source %d, sink %d", src.Counters().Frames.Load(), snk.Counters().Frames.Load())
	}
	if snk.Counters().Invalid.Load() != 0 || src.Counters().Invalid.Load() != 0 {
		t.Fatal("invalid descriptors counted on an honest stream")
	}
}

func TestSessionFilesInProcess(t *testing.T) {
	sf, err := NewSessionFiles("test", DefaultConfig(), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	again, err := SessionFilesFrom(sf.Files(), DefaultConfig(), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	c, err := OpenClient(again)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := OpenServer(sf)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pump(t, c.TX, s.TX, 5000, func(i int) int { return 60 + i%1500 }, 64)
	pump(t, s.RX, c.RX, 500, func(i int) int { return 1 + (i*997)%65536 }, 16)
}

// Frames start on a cache line by default and 2 bytes into their block with IPAlign; both
// streams carry frames up to MaxFrame, and acknowledgements find their blocks again.
func TestFramePlacement(t *testing.T) {
	for _, align := range []bool{false, true} {
		cfg := Config{QueueSize: 16, BulkSize: 8 * BlockSize, IPAlign: align}
		src, snk, err := NewHeapStream(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p, err := src.Alloc(64)
		if err != nil {
			t.Fatal(err)
		}
		want := uint32(cfg.bulkStart())
		if align {
			want += IPAlignShift
		}
		if p.Offset != want {
			t.Errorf("IPAlign %v: first frame at %d, want %d", align, p.Offset, want)
		}
		src.Release(p)
		if _, err := src.Alloc(cfg.MaxFrame() + 1); err == nil {
			t.Errorf("IPAlign %v: allocated more than MaxFrame", align)
		}
		pump(t, src, snk, 50, func(i int) int { return []int{64, 1500, cfg.MaxFrame()}[i%3] }, 4)
		src.Close()
		snk.Close()
	}
}

// Reserve and Commit carry frames like Alloc and TrySubmit, with offload metadata; Reserve
// refuses while the submit queue is full, a second Reserve releases the first frame, and
// Commit without a reserved frame is a caller's bug.
func TestReserveCommit(t *testing.T) {
	src, snk, err := NewHeapStream(Config{QueueSize: 4, BulkSize: 8 * BlockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer snk.Close()
	off := netdev.Offload{Flags: netdev.OffloadNeedsCsum, CsumStart: 34, CsumOffset: 6}
	for i := range 4 {
		b, ok := src.Reserve(100 + i)
		if !ok || len(b) != 100+i {
			t.Fatalf("frame %d: Reserve = %d bytes, %v", i, len(b), ok)
		}
		fill(b, i)
		if i == 3 {
			src.Commit(90, off) // trimmed
		} else {
			src.Commit(len(b), netdev.Offload{})
		}
	}
	if _, ok := src.Reserve(100); ok {
		t.Fatal("Reserve succeeded with the submit queue full")
	}
	src.Wakeup()
	for i := range 4 {
		p, ok := snk.TryGet()
		if !ok {
			t.Fatalf("frame %d missing", i)
		}
		b, want := snk.Payload(p), 100+i
		if i == 3 {
			want = 90
		}
		if len(b) != want || !check(b, i) {
			t.Fatalf("frame %d: %d bytes, want %d, or bad payload", i, len(b), want)
		}
		if got := p.Offload(); (i == 3) != (got == off) {
			t.Fatalf("frame %d: offload %+v", i, got)
		}
		snk.TryAck(p)
	}
	snk.Wakeup()
	if n := src.ReleaseAcked(); n != 4 {
		t.Fatalf("ReleaseAcked = %d, want 4", n)
	}
	for range 20 { // a reserved frame left uncommitted is released by the next Reserve
		if _, ok := src.Reserve(BlockSize); !ok {
			t.Fatal("Reserve failed: an uncommitted frame was not released")
		}
	}
	if _, ok := src.Reserve(src.Config().MaxFrame() + 1); ok {
		t.Fatal("Reserve took more than MaxFrame")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Commit without a reserved frame did not panic")
		}
	}()
	src.Commit(10, netdev.Offload{})
}
