package afpacket

import (
	"testing"

	"github.com/nicstack/nicstack/internal/backendtest"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/runtime/netns"
)

// go test -run '^$' -bench . ./drivers/afpacket (root): frames/s and Gbit/s of Write alone, and
// of Write and Read together through the kernel's forwarding on the far end of a veth pair, for
// MTU 1500 frames and super-frames; also RX frames per wakeup and TX frames per kick.
func BenchmarkAFPacket(b *testing.B) {
	for _, bf := range backendtest.BenchFrames {
		b.Run("write/"+bf.Name, func(b *testing.B) {
			_, s, e := env(b)
			backendtest.BenchWrite(b, e, bf)
			b.ReportMetric(float64(s.Stats.TxFrames.Load())/float64(max(s.Stats.TxKicks.Load(), 1)), "frames/kick")
		})
		b.Run("forward/"+bf.Name, func(b *testing.B) {
			host, s, e := env(b)
			backendtest.ForwardBack(b, host, "nsb0", e.Path.Src.IP)
			backendtest.BenchForward(b, e, bf)
			if drops, err := s.KernelDrops(); err == nil && drops > 0 {
				b.ReportMetric(float64(drops), "ring-drops")
			}
			b.ReportMetric(float64(s.Stats.RxFrames.Load())/float64(max(s.Stats.RxBursts.Load(), 1)), "frames/wakeup")
			b.ReportMetric(float64(s.Stats.TxFrames.Load())/float64(max(s.Stats.TxKicks.Load(), 1)), "frames/kick")
		})
	}
}

func env(b *testing.B) (*netns.NS, *Socket, backendtest.Env) {
	_, host, s, path := setup(b, Config{})
	return host, s, backendtest.Env{Dev: s, MaxFrame: netdev.MaxFrame, Kernel: host, Path: path, TxDropped: s.Stats.TxDropped.Load}
}
