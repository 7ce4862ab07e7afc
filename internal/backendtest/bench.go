package backendtest

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/netns"
)

// Bounce is the prefix the kernel routes back to the back end in a forwarding benchmark.
var Bounce = netip.MustParsePrefix("198.18.2.0/24")

// ForwardBack makes the kernel of n route Bounce back out of dev (the interface facing the
// back end) to the host at via, so frames written to the back end come back to it.
func ForwardBack(tb testing.TB, n *netns.NS, dev string, via netip.Addr) {
	tb.Helper()
	for k, v := range map[string]string{
		"net.ipv4.ip_forward":                      "1",
		"net.ipv4.conf.all.send_redirects":         "0",
		"net.ipv4.conf." + dev + ".send_redirects": "0",
		"net.ipv4.conf.all.rp_filter":              "0",
		"net.ipv4.conf." + dev + ".rp_filter":      "0",
	} {
		if err := n.Sysctl(k, v); err != nil {
			tb.Fatal(err)
		}
	}
	if err := n.IP("route", "add", Bounce.String(), "via", via.String(), "dev", dev); err != nil {
		tb.Fatal(err)
	}
}

// BenchFrame is one kind of frame a benchmark sends.
type BenchFrame struct {
	Name string
	Make func(p Path) ([]byte, netdev.Offload)
}

// BenchFrames are the two sizes the back ends are measured with: full-size MTU 1500 UDP frames
// and 64000-byte TCP super-frames (GSO_TCPV4, MSS 1448, NEEDS_CSUM).
var BenchFrames = []BenchFrame{
	{"mtu1500", func(p Path) ([]byte, netdev.Offload) { return p.UDP(9000, 9001, make([]byte, 1472), false) }},
	{"super64k", func(p Path) ([]byte, netdev.Offload) {
		return p.TCP(9000, 9001, 1, 1, header.TCPAck, nil, make([]byte, 64000), 1448)
	}},
}

// BenchWrite measures Write alone: batches of 64 frames the kernel receives and drops at once
// (addressed to another host's MAC).
func BenchWrite(b *testing.B, e Env, bf BenchFrame) {
	p := e.Path
	p.Dst.MAC = net.HardwareAddr{0x02, 0, 0x5e, 0, 0, 0x99}
	f, o := bf.Make(p)
	const batch = 64
	frames, offs := make([][]byte, batch), make([]netdev.Offload, batch)
	for i := range frames {
		frames[i], offs[i] = f, o
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; {
		k := min(batch, b.N-sent)
		if _, err := e.Dev.Write(frames[:k], offs[:k]); err != nil {
			b.Fatal(err)
		}
		sent += k
	}
	report(b, b.N, len(f), time.Since(start))
}

// BenchForward measures both paths at once: batches of frames written to the back end,
// forwarded by the kernel (see ForwardBack) and read back by another goroutine, with at most
// 256 frames or 1 MiB in flight (so that an RX ring of a few MiB does not overflow). The caller
// closes the device afterwards, which ends the reader.
func BenchForward(b *testing.B, e Env, bf BenchFrame) {
	p := e.Path
	p.Dst.IP = Bounce.Addr().Next()
	f, o := bf.Make(p)
	window := min(max((1<<20)/len(f), 8), 256)
	batch := min(32, window/2)
	frames, offs := make([][]byte, batch), make([]netdev.Offload, batch)
	for i := range frames {
		frames[i], offs[i] = f, o
	}
	var got atomic.Int64
	progress := make(chan struct{}, 1)
	bufs, sizes, roffs := make([][]byte, batch), make([]int, batch), make([]netdev.Offload, batch)
	for i := range bufs {
		bufs[i] = make([]byte, e.MaxFrame)
	}
	go func() {
		for {
			n, err := e.Dev.Read(bufs, sizes, roffs)
			got.Add(int64(n))
			select {
			case progress <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	stall := time.NewTimer(time.Second)
	// wait blocks until the reader has caught up to within limit frames, or a second passes
	// without progress (frames lost in the kernel).
	wait := func(sent, limit int) bool {
		for int64(sent)-got.Load() > int64(limit) {
			stall.Reset(time.Second)
			select {
			case <-progress:
			case <-stall.C:
				return false
			}
		}
		return true
	}
	sent := 0
	for sent < b.N {
		if !wait(sent, window-batch) {
			b.Fatalf("no progress: %d sent, %d back", sent, got.Load())
		}
		k := min(batch, b.N-sent)
		if _, err := e.Dev.Write(frames[:k], offs[:k]); err != nil {
			b.Fatal(err)
		}
		sent += k
	}
	wait(sent, 0)
	elapsed := time.Since(start)
	if lost := int64(sent) - got.Load(); lost > 0 {
		b.ReportMetric(float64(lost), "lost")
	}
	report(b, int(got.Load()), len(f), elapsed)
}

func report(b *testing.B, frames, size int, d time.Duration) {
	b.ReportMetric(float64(frames)/d.Seconds(), "frames/s")
	b.ReportMetric(float64(frames)*float64(size)*8/d.Seconds()/1e9, "Gbit/s")
}
