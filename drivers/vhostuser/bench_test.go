package vhostuser

import (
	"fmt"
	"testing"

	"github.com/nicstack/nicstack/netdev"
)

// go test -run '^$' -bench Ring ./drivers/vhostuser: frames/s through the rings with the Go
// front end as the guest, in batches of 32, one goroutine playing both sides in turn (the
// device's cost per frame, without a second CPU): tx is Read of the guest's frames, rx is
// Write into its buffers.
func BenchmarkRing(b *testing.B) {
	const batch = 32
	for _, size := range []int{60, 1514} {
		b.Run(fmt.Sprintf("tx/%d", size), func(b *testing.B) {
			fe := newFrontend(b)
			fe.start(allFeatures)
			frame := tcpFrame(size-54, 1)
			bufs := make([][]byte, batch)
			for i := range bufs {
				bufs[i] = make([]byte, 2048)
			}
			sizes, offs := make([]int, batch), make([]netdev.Offload, batch)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for done := 0; done < b.N; {
				k := min(batch, b.N-done)
				for range k {
					fe.sendFrame([12]byte{}, frame)
				}
				for got := 0; got < k; {
					n, err := fe.dev.Read(bufs, sizes, offs)
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
				fe.reap(txQueue)
				done += k
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
		})
		b.Run(fmt.Sprintf("rx/%d", size), func(b *testing.B) {
			fe := newFrontend(b)
			fe.start(allFeatures)
			frames := make([][]byte, batch)
			for i := range frames {
				frames[i] = tcpFrame(size-54, byte(i))
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			for done := 0; done < b.N; {
				k := min(batch, b.N-done)
				fe.postRx(k, 2048)
				fe.dev.Write(frames[:k], nil)
				if u := fe.reap(rxQueue); len(u) != k {
					b.Fatalf("%d of %d frames placed", len(u), k)
				}
				done += k
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}
