package packetstream

import (
	"encoding/binary"
	"testing"
	"time"
	"unsafe"
)

// FuzzHostilePeer runs an honest source and an honest sink over one heap region while the
// fuzz input, between their steps, scribbles anything anywhere in the region: indices, armed
// flags, descriptors, frame bytes. Each side must stay within the region, never panic, never
// loop without bound, never return a packet it does not own (source) or a payload outside
// the bulk buffer (sink).
func FuzzHostilePeer(f *testing.F) {
	f.Add([]byte{0, 10, 0, 0, 1, 2, 3, 4, 4})
	f.Add([]byte{0, 1, 0, 1, 0, 2, 5, 0, 0, 0xff, 0xff, 0xff, 0xff, 2, 3, 4})
	f.Add([]byte{0, 0, 0, 1, 2, 3, 5, 0x40, 0x80, 1, 0, 0, 0, 4, 5, 0x00, 0x40, 0, 0, 0, 0x80, 2, 4})
	f.Fuzz(func(t *testing.T, ops []byte) {
		cfg := Config{QueueSize: 8, BulkSize: 8 * BlockSize}
		src, snk, err := NewHeapStream(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		defer snk.Close()
		mem := src.reg.mem
		lo := uintptr(unsafe.Pointer(&mem[cfg.bulkStart()]))
		hi := lo + uintptr(cfg.BulkSize)
		inFlight := map[uint32]bool{} // offsets the source submitted and has not taken back
		sw, err := NewWaiter(snk)
		if err != nil {
			t.Fatal(err)
		}
		defer sw.Close()
		sw.Spin = 1
		next := func(n int) []byte {
			if len(ops) < n {
				b := make([]byte, n)
				copy(b, ops)
				ops = nil
				return b
			}
			b := ops[:n]
			ops = ops[n:]
			return b
		}
		for len(ops) > 0 {
			switch op := next(1)[0]; op % 8 {
			case 0: // the source sends a frame
				p, err := src.Alloc(1 + int(binary.LittleEndian.Uint16(next(2)))%(3*BlockSize))
				if err != nil {
					continue
				}
				fill(src.Payload(p), int(op))
				if src.TrySubmit(p) {
					inFlight[p.Offset] = true
				} else {
					src.Release(p)
				}
			case 1:
				src.Wakeup()
			case 2: // the sink takes a frame, reads all of it, acknowledges it
				if p, ok := snk.TryGet(); ok {
					if b := snk.Payload(p); b != nil {
						start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
						if start < lo || start+uintptr(len(b)) > hi {
							t.Fatalf("payload [%#x, +%d) outside the bulk buffer", start, len(b))
						}
						check(b, 0) // reads every byte
					}
					snk.TryAck(p)
				}
			case 3:
				snk.Wakeup()
			case 4: // the source takes acknowledgements back
				for i := 0; i < 2*cfg.QueueSize; i++ {
					p, ok := src.GetAcked()
					if !ok {
						break
					}
					if !inFlight[p.Offset] {
						t.Fatalf("GetAcked returned %+v, which is not in flight", p)
					}
					delete(inFlight, p.Offset)
					src.Release(p)
				}
			case 5, 6: // scribble 4 bytes, mostly over the queue headers and descriptors
				at := int(binary.LittleEndian.Uint16(next(2)))
				if op%8 == 5 {
					at %= cfg.bulkStart()
				} else {
					at %= len(mem) - 4
				}
				copy(mem[at:], next(4))
			case 7: // the sink waits without time: exercises arm, re-check, disarm
				sw.WaitUntil(time.Now())
			}
			if src.InFlight() != len(inFlight) {
				t.Fatalf("source counts %d in flight, the test %d", src.InFlight(), len(inFlight))
			}
		}
	})
}
