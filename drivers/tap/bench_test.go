package tap

import (
	"testing"

	"github.com/nicstack/nicstack/internal/backendtest"
	"github.com/nicstack/nicstack/netdev"
)

// go test -run '^$' -bench . ./drivers/tap (root): frames/s and Gbit/s of Write alone, and of
// Write and Read together through the kernel's forwarding, for MTU 1500 frames and super-frames.
func BenchmarkTAP(b *testing.B) {
	for _, bf := range backendtest.BenchFrames {
		b.Run("write/"+bf.Name, func(b *testing.B) {
			backendtest.BenchWrite(b, env(b), bf)
		})
		b.Run("forward/"+bf.Name, func(b *testing.B) {
			e := env(b)
			backendtest.ForwardBack(b, e.Kernel, "nstap0", e.Path.Src.IP)
			backendtest.BenchForward(b, e, bf)
		})
	}
}

func env(b *testing.B) backendtest.Env {
	ns, d, path := setup(b)
	return backendtest.Env{Dev: d, MaxFrame: netdev.MaxFrame, Kernel: ns, Path: path, TxDropped: d.Stats.TxDropped.Load}
}
