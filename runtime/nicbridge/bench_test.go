package nicbridge

import (
	"testing"

	"github.com/nicstack/nicstack/drivers/afpacket"
	"github.com/nicstack/nicstack/internal/backendtest"
	"github.com/nicstack/nicstack/netdev"
)

// go test -run '^$' -bench . ./drivers/linuxnic (root): frames/s and Gbit/s through an Uplink
// session, the NIC and its back end, forwarded by the kernel and back the same way, for MTU
// 1500 frames and super-frames; also frames per router wakeup (RX) and per batch (TX).
func BenchmarkNIC(b *testing.B) {
	for _, bf := range backendtest.BenchFrames {
		b.Run("tap/"+bf.Name, func(b *testing.B) {
			ns, d, path := tapSetup(b)
			n, r := attach(b, d, d.Close)
			backendtest.ForwardBack(b, ns, "nstap0", path.Src.IP)
			backendtest.BenchForward(b, backendtest.Env{Dev: r, MaxFrame: netdev.MaxFrame, Kernel: ns, Path: path}, bf)
			reportBatching(b, n)
		})
		b.Run("packet/"+bf.Name, func(b *testing.B) {
			host, s, path := packetSetup(b, afpacket.Config{})
			n, r := attach(b, s, s.Close)
			backendtest.ForwardBack(b, host, "nsb0", path.Src.IP)
			backendtest.BenchForward(b, backendtest.Env{Dev: r, MaxFrame: netdev.MaxFrame, Kernel: host, Path: path}, bf)
			reportBatching(b, n)
			b.ReportMetric(float64(s.Stats.TxFrames.Load())/float64(max(s.Stats.TxKicks.Load(), 1)), "frames/kick")
		})
	}
}

func reportBatching(b *testing.B, n *NIC) {
	st := n.Stats
	b.ReportMetric(float64(st.RxFrames.Load())/float64(max(st.RxBursts.Load(), 1)), "frames/wakeup")
	b.ReportMetric(float64(st.TxFrames.Load())/float64(max(st.TxBatches.Load(), 1)), "frames/batch")
	if d := st.RxDropped.Load(); d > 0 {
		b.ReportMetric(float64(d), "rx-dropped")
	}
}
