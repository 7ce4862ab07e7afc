package packetstream

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// The CPU cost of one frame through source and sink in one goroutine (both sides' work, no
// cross-CPU traffic): a lower bound for what two processes can reach.
func BenchmarkOneGoroutine(b *testing.B) {
	for _, size := range []int{64, 1500} {
		b.Run(itoa(size), func(b *testing.B) {
			src, snk, err := NewHeapStream(DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			defer src.Close()
			defer snk.Close()
			tmpl := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var seq uint64
			for i := 0; i < b.N; i += 64 {
				for p, ok := src.GetAcked(); ok; p, ok = src.GetAcked() {
					src.Release(p)
				}
				for k := 0; k < 64 && src.CanSubmit(); k++ {
					p, err := src.Alloc(size)
					if err != nil {
						break
					}
					pl := src.Payload(p)
					copy(pl, tmpl)
					binary.LittleEndian.PutUint64(pl, seq)
					seq++
					src.TrySubmit(p)
				}
				src.Wakeup()
				for k := 0; k < 64 && snk.CanAck(); k++ {
					p, ok := snk.TryGet()
					if !ok {
						break
					}
					pl := snk.Payload(p)
					if !bytes.Equal(pl[8:], tmpl[8:]) {
						b.Fatal("bad")
					}
					snk.TryAck(p)
				}
				snk.Wakeup()
			}
		})
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		if i /= 10; i == 0 {
			return string(b[n:])
		}
	}
}
