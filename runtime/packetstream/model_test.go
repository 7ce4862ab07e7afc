package packetstream

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/nicstack/nicstack/netdev"
)

// The allocator against a model bitmap: a one-block frame takes the last released one-block
// run that is still free, else the first free block; longer runs are first fit; a trimmed run
// frees its tail; no overlaps, and Alloc fails only when no free run is long enough.
func TestAllocatorModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		blocks := rapid.IntRange(1, 200).Draw(t, "blocks")
		a := newAllocator(blocks, IPAlignShift)
		used := make([]bool, blocks)
		live := map[int]int{} // first block -> run
		var order []int
		var released []int // one-block runs as released, the last at the end
		t.Repeat(map[string]func(*rapid.T){
			"alloc": func(t *rapid.T) {
				size := rapid.IntRange(1, min(blocks, 8)*BlockSize-IPAlignShift).Draw(t, "size")
				run := (size + IPAlignShift + BlockSize - 1) / BlockSize
				want := -1
				for run == 1 && want < 0 && len(released) > 0 {
					if b := released[len(released)-1]; !used[b] {
						want = b
					}
					released = released[:len(released)-1]
				}
				for s := 0; s+run <= blocks && want < 0; s++ {
					free := true
					for i := s; i < s+run; i++ {
						free = free && !used[i]
					}
					if free {
						want = s
					}
				}
				got := a.alloc(size)
				if got != want {
					t.Fatalf("alloc(%d): got block %d, want %d", size, got, want)
				}
				if got >= 0 {
					for i := got; i < got+run; i++ {
						used[i] = true
					}
					live[got] = run
					order = append(order, got)
				}
			},
			"trim": func(t *rapid.T) {
				if len(order) == 0 {
					t.Skip("nothing allocated")
				}
				b := order[rapid.IntRange(0, len(order)-1).Draw(t, "which")]
				size := rapid.IntRange(1, live[b]*BlockSize-IPAlignShift).Draw(t, "size")
				run := (size + IPAlignShift + BlockSize - 1) / BlockSize
				a.trim(b, size)
				for k := b + run; k < b+live[b]; k++ {
					used[k] = false
				}
				live[b] = run
			},
			"release": func(t *rapid.T) {
				if len(order) == 0 {
					t.Skip("nothing allocated")
				}
				i := rapid.IntRange(0, len(order)-1).Draw(t, "which")
				b := order[i]
				order = append(order[:i], order[i+1:]...)
				a.release(b)
				if live[b] == 1 && len(released) < blocks { // the stack holds as many as there are blocks
					released = append(released, b)
				}
				for k := b; k < b+live[b]; k++ {
					used[k] = false
				}
				delete(live, b)
			},
			"": func(t *rapid.T) {
				n := 0
				for _, u := range used {
					if u {
						n++
					}
				}
				if n != a.inUse {
					t.Fatalf("allocator counts %d blocks in use, model %d", a.inUse, n)
				}
			},
		})
	})
}

// Source and sink on a heap region against a model of the two queues: frames come out in
// order, exactly once, the queues hold QueueSize entries, packets in flight never share
// bulk bytes, and with a byte bound (SetQueueBytes) the bytes in flight stay within it unless
// one frame alone is larger, while a frame that fits is never refused for bytes. Runs under
// -race with real atomics.
func TestStreamModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{
			QueueSize: 1 << rapid.IntRange(1, 5).Draw(t, "log2 queue"),
			BulkSize:  rapid.IntRange(1, 40).Draw(t, "blocks") * BlockSize,
		}
		src, snk, err := NewHeapStream(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		defer snk.Close()
		queueBytes := 0
		if rapid.Bool().Draw(t, "byte bound") {
			queueBytes = rapid.IntRange(1, 4*BlockSize).Draw(t, "queue bytes")
		}
		src.SetQueueBytes(queueBytes)
		inFlightBytes := func(m map[uint32]int) (n int) {
			for _, size := range m {
				n += size
			}
			return n
		}
		var (
			owned      []Packet // allocated, not submitted
			submitted  []int    // sequence numbers in the submit queue, in order
			sinkHeld   []Packet // got, not acked
			acked      []uint32 // offsets in the ack queue, in order
			seq, next  int
			srcDirty   bool // source did try calls since its last Wakeup
			sinkDirty  bool
			inFlightAt = map[uint32]int{} // size by offset
		)
		fits := func(size int) bool {
			n := inFlightBytes(inFlightAt)
			return queueBytes == 0 || n == 0 || n+size <= queueBytes
		}
		t.Repeat(map[string]func(*rapid.T){
			"alloc": func(t *rapid.T) {
				size := rapid.IntRange(8, min(cfg.MaxFrame(), 3*BlockSize)).Draw(t, "size")
				p, err := src.Alloc(size)
				if err == ErrExhausted {
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				b := src.Payload(p)
				if len(b) != size || int(p.Offset) < cfg.bulkStart() || int(p.Offset)+size > cfg.bulkStart()+cfg.BulkSize {
					t.Fatalf("packet %+v outside the bulk buffer", p)
				}
				for _, q := range append(append([]Packet(nil), owned...), sinkHeld...) {
					if p.Offset < q.Offset+q.Size && q.Offset < p.Offset+p.Size {
						t.Fatalf("packet %+v overlaps %+v", p, q)
					}
				}
				if inFlightAt[p.Offset] > 0 {
					t.Fatalf("packet at %d allocated while in flight", p.Offset)
				}
				fill(b, seq)
				p = p.WithOffload(netdev.Offload{GSOSize: uint16(seq), CsumOffset: uint16(seq >> 3), Flags: netdev.OffloadNeedsCsum})
				seq++
				owned = append(owned, p)
			},
			"trim": func(t *rapid.T) {
				if len(owned) == 0 {
					t.Skip()
				}
				i := rapid.IntRange(0, len(owned)-1).Draw(t, "which")
				owned[i] = src.Trim(owned[i], rapid.IntRange(8, int(owned[i].Size)).Draw(t, "size"))
			},
			"submit": func(t *rapid.T) {
				if len(owned) == 0 {
					t.Skip()
				}
				p := owned[0]
				fit := fits(int(p.Size))
				ok := src.TrySubmit(p)
				if ok && len(submitted) >= cfg.QueueSize {
					t.Fatalf("TrySubmit accepted a %dth entry into a queue of %d", len(submitted)+1, cfg.QueueSize)
				}
				if ok && !fit {
					t.Fatalf("TrySubmit accepted %d bytes over the bound of %d (%d in flight)", p.Size, queueBytes, inFlightBytes(inFlightAt))
				}
				if !ok && fit && !sinkDirty && len(submitted) < cfg.QueueSize {
					// The sink published everything: only a truly full queue refuses.
					t.Fatalf("TrySubmit refused with %d of %d entries used", len(submitted), cfg.QueueSize)
				}
				if ok {
					owned = owned[1:]
					submitted = append(submitted, int(p.Offload().GSOSize))
					inFlightAt[p.Offset] = int(p.Size)
					srcDirty = true
				}
			},
			"reserveCommit": func(t *rapid.T) {
				if len(owned) > 0 {
					t.Skip("frames are numbered in the order they are submitted")
				}
				size := rapid.IntRange(8, min(cfg.MaxFrame(), 3*BlockSize)).Draw(t, "size")
				fit := fits(size)
				b, ok := src.Reserve(size)
				if ok && !fit {
					t.Fatalf("Reserve accepted %d bytes over the bound of %d (%d in flight)", size, queueBytes, inFlightBytes(inFlightAt))
				}
				if !ok {
					if !sinkDirty && len(submitted) < cfg.QueueSize && src.alloc.inUse == 0 {
						t.Fatalf("Reserve refused with %d of %d entries used and the buffer empty", len(submitted), cfg.QueueSize)
					}
					return
				}
				if len(submitted) >= cfg.QueueSize {
					t.Fatalf("Reserve accepted with the submit queue full (%d)", len(submitted))
				}
				off := uint32(src.bulkStart) + uint32(src.reserved*BlockSize+src.alloc.shift)
				if len(b) != size || int(off)+size > cfg.bulkStart()+cfg.BulkSize {
					t.Fatalf("reserved %d bytes at %d for %d", len(b), off, size)
				}
				for _, q := range sinkHeld {
					if off < q.Offset+q.Size && q.Offset < off+uint32(size) {
						t.Fatalf("reserved frame at %d overlaps %+v", off, q)
					}
				}
				if inFlightAt[off] > 0 {
					t.Fatalf("frame at %d reserved while in flight", off)
				}
				fill(b, seq)
				sent := rapid.IntRange(8, size).Draw(t, "sent")
				src.Commit(sent, netdev.Offload{GSOSize: uint16(seq), CsumOffset: uint16(seq >> 3), Flags: netdev.OffloadNeedsCsum})
				submitted = append(submitted, seq)
				seq++
				inFlightAt[off] = sent
				srcDirty = true
			},
			"sourceWakeup": func(t *rapid.T) { src.Wakeup(); srcDirty = false },
			"sinkWakeup":   func(t *rapid.T) { snk.Wakeup(); sinkDirty = false },
			"get": func(t *rapid.T) {
				p, ok := snk.TryGet()
				if !ok {
					if len(submitted) > 0 && !srcDirty {
						t.Fatalf("TryGet found nothing with %d published", len(submitted))
					}
					return
				}
				if len(submitted) == 0 {
					t.Fatalf("TryGet returned %+v from an empty queue", p)
				}
				want := submitted[0]
				submitted = submitted[1:]
				if want != next || int(p.Offload().GSOSize) != int(uint16(next)) {
					t.Fatalf("got frame %d (offload %d), want %d", want, p.Offload().GSOSize, next)
				}
				if !check(snk.Payload(p), next) {
					t.Fatalf("frame %d damaged", next)
				}
				next++
				sinkHeld = append(sinkHeld, p)
				sinkDirty = true
			},
			"getBatch": func(t *rapid.T) {
				want := rapid.IntRange(1, 2*cfg.QueueSize).Draw(t, "want")
				pks, frames := make([]Packet, want), make([][]byte, want)
				k := snk.TryGetBatch(pks, frames)
				if k > len(submitted) {
					t.Fatalf("TryGetBatch got %d with %d submitted", k, len(submitted))
				}
				room := cfg.QueueSize - len(acked)
				if k > room {
					t.Fatalf("TryGetBatch got %d with ack room for %d", k, room)
				}
				if !srcDirty && k != min(want, len(submitted), room) {
					// The source published everything: only the queues limit the batch.
					t.Fatalf("TryGetBatch got %d of %d wanted, %d submitted, ack room %d", k, want, len(submitted), room)
				}
				for i, p := range pks[:k] {
					if submitted[0] != next || int(p.Offload().GSOSize) != int(uint16(next)) {
						t.Fatalf("got frame %d (offload %d), want %d", submitted[0], p.Offload().GSOSize, next)
					}
					if !check(frames[i], next) || len(frames[i]) != int(p.Size) {
						t.Fatalf("frame %d damaged", next)
					}
					submitted = submitted[1:]
					next++
					sinkHeld = append(sinkHeld, p)
				}
				if k > 0 {
					sinkDirty = true
				}
			},
			"ackBatch": func(t *rapid.T) {
				if len(sinkHeld) == 0 {
					t.Skip()
				}
				n := rapid.IntRange(1, len(sinkHeld)).Draw(t, "n")
				k := snk.TryAckBatch(sinkHeld[:n])
				if len(acked)+k > cfg.QueueSize {
					t.Fatalf("TryAckBatch filled the ack queue to %d of %d", len(acked)+k, cfg.QueueSize)
				}
				if k < n && !srcDirty && len(acked)+k < cfg.QueueSize {
					t.Fatalf("TryAckBatch acknowledged %d of %d with %d of %d entries used", k, n, len(acked), cfg.QueueSize)
				}
				for _, p := range sinkHeld[:k] {
					acked = append(acked, p.Offset)
				}
				sinkHeld = sinkHeld[k:]
				if k > 0 {
					sinkDirty = true
				}
			},
			"releaseAcked": func(t *rapid.T) {
				k := src.ReleaseAcked()
				if k > len(acked) || (k < len(acked) && !sinkDirty) {
					t.Fatalf("ReleaseAcked released %d of %d acknowledged", k, len(acked))
				}
				for _, off := range acked[:k] {
					delete(inFlightAt, off)
				}
				acked = acked[k:]
				if k > 0 {
					srcDirty = true
				}
			},
			"ack": func(t *rapid.T) {
				if len(sinkHeld) == 0 {
					t.Skip()
				}
				p := sinkHeld[0]
				ok := snk.TryAck(p)
				if ok && len(acked) >= cfg.QueueSize {
					t.Fatalf("TryAck accepted a %dth entry into a queue of %d", len(acked)+1, cfg.QueueSize)
				}
				if !ok && !srcDirty && len(acked) < cfg.QueueSize {
					t.Fatalf("TryAck refused with %d of %d entries used", len(acked), cfg.QueueSize)
				}
				if ok {
					sinkHeld = sinkHeld[1:]
					acked = append(acked, p.Offset)
					sinkDirty = true
				}
			},
			"getAcked": func(t *rapid.T) {
				p, ok := src.GetAcked()
				if !ok {
					if len(acked) > 0 && !sinkDirty {
						t.Fatalf("GetAcked found nothing with %d published", len(acked))
					}
					return
				}
				if len(acked) == 0 || acked[0] != p.Offset {
					t.Fatalf("GetAcked returned %+v, model has %v", p, acked)
				}
				acked = acked[1:]
				srcDirty = true // the source's ack tail is published at its next Wakeup
				delete(inFlightAt, p.Offset)
				if rapid.Bool().Draw(t, "reuse") {
					// An acknowledged packet is the source's again: refill and resubmit it.
					fill(src.Payload(p), seq)
					p = p.WithOffload(netdev.Offload{GSOSize: uint16(seq), CsumOffset: uint16(seq >> 3), Flags: netdev.OffloadNeedsCsum})
					seq++
					owned = append(owned, p)
				} else {
					src.Release(p)
				}
			},
			"": func(t *rapid.T) {
				if n := inFlightBytes(inFlightAt); src.InFlightBytes() != n {
					t.Fatalf("source counts %d bytes in flight, model %d", src.InFlightBytes(), n)
				}
				if n := inFlightBytes(inFlightAt); queueBytes > 0 && len(inFlightAt) > 1 && n > queueBytes {
					t.Fatalf("%d bytes in %d frames in flight over the bound of %d", n, len(inFlightAt), queueBytes)
				}
				if src.InFlight() != len(submitted)+len(sinkHeld)+len(acked) {
					t.Fatalf("source counts %d in flight, model %d", src.InFlight(), len(submitted)+len(sinkHeld)+len(acked))
				}
				if src.Counters().Invalid.Load()+snk.Counters().Invalid.Load() != 0 {
					t.Fatal("invalid descriptors on an honest stream")
				}
			},
		})
	})
}
