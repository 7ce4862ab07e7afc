package netstack

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/iperf"
)

// pair wires two stacks back to back: each one's outbound frames are delivered to the other,
// the way two guests on one packet-stream session would see each other.
func pair(t testing.TB, offloadA, offloadB bool, cut ...*atomic.Bool) (a, b *Stack) {
	t.Helper()
	a, b = newPair(t, offloadA, offloadB, cut...)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// newPair is pair without the clean-up; A's frames are dropped while cut (if given) is set.
func newPair(t testing.TB, offloadA, offloadB bool, cut ...*atomic.Bool) (a, b *Stack) {
	t.Helper()
	ca := Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, Offload: offloadA, Address: netip.MustParsePrefix("198.18.0.1/24")}
	cb := Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, Offload: offloadB, Address: netip.MustParsePrefix("198.18.0.2/24")}
	return newPairOf(t, ca, cb, cut...)
}

// newPairOf is newPair with the stacks' configs. A stack sends from the start (IPv6's
// duplicate address detection and router solicitation): frames before both exist are lost,
// as on a cable not plugged in yet.
func newPairOf(t testing.TB, ca, cb Config, cut ...*atomic.Bool) (a, b *Stack) {
	t.Helper()
	var pa, pb atomic.Pointer[Stack]
	deliver := func(to *atomic.Pointer[Stack], f []Frame) int {
		if st := to.Load(); st != nil {
			st.DeliverFrames(f)
		}
		return len(f)
	}
	var err error
	a, err = New(ca, OutboundFunc(func(f []Frame) int {
		if len(cut) == 0 || !cut[0].Load() {
			deliver(&pb, f)
		}
		return len(f)
	}))
	if err != nil {
		t.Fatal(err)
	}
	b, err = New(cb, OutboundFunc(func(f []Frame) int { return deliver(&pa, f) }))
	if err != nil {
		t.Fatal(err)
	}
	pa.Store(a)
	pb.Store(b)
	return a, b
}

func TestBackToBackIperf(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		clientTSO, serverTSO bool
		reverse              bool
	}{
		{"mtu1500", false, false, false},
		{"mtu1500-reverse", false, false, true},
		{"gso", true, true, false},
		// Super-frames into a stack that itself sends plain frames.
		{"gso-to-plain", true, false, false},
		{"gso-reverse", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := pair(t, tc.clientTSO, tc.serverTSO)
			ln, err := server.Listen("tcp", ":5201")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			srvDone := make(chan error, 1)
			go func() { srvDone <- (&iperf.Server{Network: server, OneOff: true}).Serve(ctx, ln) }()
			rep, err := iperf.RunClient(ctx, iperf.ClientConfig{Network: client, Server: "198.18.0.2:5201",
				Duration: 500 * time.Millisecond, Reverse: tc.reverse, Parallel: 2})
			if err != nil {
				t.Fatal(err)
			}
			if err := <-srvDone; err != nil {
				t.Fatal(err)
			}
			bps := rep.Received().BitsPerSecond
			if bps <= 0 {
				t.Fatalf("no throughput: %+v", rep.End)
			}
			sender, tso := client, tc.clientTSO
			if tc.reverse {
				sender, tso = server, tc.serverTSO
			}
			st := sender.Stats()
			avg := st.TxBytes.Load() / max(st.TxFrames.Load(), 1)
			t.Logf("%s: %.2f Gbit/s, sender's average frame %d bytes, %d dropped", tc.name, bps/1e9, avg, st.TxDropped.Load())
			if tso != (avg > 1514) {
				t.Fatalf("TSO %v but average frame %d bytes", tso, avg)
			}
		})
	}
}

// BenchmarkBackToBack moves data over one TCP connection between two stacks in memory and
// reports Gbit/s, at MTU 1500 and with TSO super-frames.
func BenchmarkBackToBack(b *testing.B) {
	for _, bc := range []struct {
		name    string
		offload bool
	}{{"mtu1500", false}, {"gso", true}} {
		b.Run(bc.name, func(b *testing.B) {
			client, server := pair(b, bc.offload, bc.offload)
			benchBulkTCP(b, client, server, "198.18.0.2:9")
		})
	}
}

// BenchmarkBackToBack6 is BenchmarkBackToBack over IPv6 (static addresses).
func BenchmarkBackToBack6(b *testing.B) {
	for _, bc := range []struct {
		name    string
		offload bool
	}{{"mtu1500", false}, {"gso", true}} {
		b.Run(bc.name, func(b *testing.B) {
			client, server := pair6(b, bc.offload)
			waitAddresses(b, client, netip.MustParsePrefix("2001:db8::1/64"))
			waitAddresses(b, server, netip.MustParsePrefix("2001:db8::2/64"))
			benchBulkTCP(b, client, server, "[2001:db8::2]:9")
		})
	}
}

// benchBulkTCP sends b.N 128 KiB writes from client to a sink on server (at address) over TCP
// and reports Gbit/s, bytes per frame on the link and the sender's retransmits.
func benchBulkTCP(b *testing.B, client, server *Stack, address string) {
	ln, err := server.Listen("tcp", ":9")
	if err != nil {
		b.Fatal(err)
	}
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- 0
			return
		}
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	c, err := client.DialContext(context.Background(), "tcp", address, iperf.Options{})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 128<<10)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	n := <-got
	b.ReportMetric(float64(n)*8/time.Since(start).Seconds()/1e9, "Gbit/s")
	st := client.Stats()
	b.ReportMetric(float64(st.TxBytes.Load())/float64(max(st.TxFrames.Load(), 1)), "B/frame")
	b.ReportMetric(float64(client.s.Stats().TCP.Retransmits.Value()), "retransmits")
}
