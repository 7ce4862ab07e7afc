package netstack

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// bind connects a stack to one side of a packet-stream session the way a component would: the
// Outbound copies each batch into the source's bulk buffer and signals once (more often only
// when it must wait); a goroutine takes batches from the sink, delivers them, acknowledges them
// and signals once.
func bind(t testing.TB, st *Stack, src *packetstream.Source, snk *packetstream.Sink) Outbound {
	t.Helper()
	w, err := packetstream.NewWaiter(snk)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		frames := make([]Frame, 0, 64)
		pkts := make([]packetstream.Packet, 0, 64)
		for {
			frames, pkts = frames[:0], pkts[:0]
			for len(pkts) < cap(pkts) {
				p, ok := snk.TryGet()
				if !ok {
					break
				}
				pkts = append(pkts, p)
				frames = append(frames, Frame{Data: snk.Payload(p), Offload: p.Offload()})
			}
			if len(pkts) == 0 {
				if err := w.Wait(); errors.Is(err, packetstream.ErrClosed) {
					return
				}
				continue
			}
			st.DeliverFrames(frames)
			for _, p := range pkts {
				snk.TryAck(p)
			}
			snk.Wakeup()
		}
	}()
	t.Cleanup(func() { w.Close(); <-done })
	// Back-pressure rather than drops: when the bulk buffer or the submit queue is full, publish
	// what is queued and wait for the peer's acknowledgements, as a NIC's full TX ring would.
	return OutboundFunc(func(frames []Frame) int {
		for p, ok := src.GetAcked(); ok; p, ok = src.GetAcked() {
			src.Release(p)
		}
		for i, f := range frames {
			p, err := src.Alloc(len(f.Data))
			for errors.Is(err, packetstream.ErrExhausted) && src.InFlight() > 0 {
				src.Wakeup()
				var acked packetstream.Packet
				if acked, err = src.WaitAcked(); err != nil {
					return i
				}
				src.Release(acked)
				p, err = src.Alloc(len(f.Data))
			}
			if err != nil {
				return i
			}
			copy(src.Payload(p), f.Data)
			p = p.WithOffload(f.Offload)
			if !src.TrySubmit(p) { // queue full: Submit publishes and waits for room
				if err := src.Submit(p); err != nil {
					src.Release(p)
					return i
				}
			}
		}
		src.Wakeup()
		return len(frames)
	})
}

// streamPair wires two stacks through a heap-backed packet-stream session.
func streamPair(t testing.TB, offload bool) (a, b *Stack) {
	t.Helper()
	cfg := packetstream.DefaultConfig()
	client, server, err := packetstream.NewHeapSession(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A stack sends from the start (IPv6's duplicate address detection): until its end of the
	// session is bound, its frames are lost.
	var outA, outB atomic.Pointer[Outbound]
	send := func(out *atomic.Pointer[Outbound], f []Frame) int {
		if o := out.Load(); o != nil {
			return (*o).WriteFrames(f)
		}
		return len(f)
	}
	a, err = New(Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, Offload: offload, Address: netip.MustParsePrefix("198.18.0.1/24")},
		OutboundFunc(func(f []Frame) int { return send(&outA, f) }))
	if err != nil {
		t.Fatal(err)
	}
	b, err = New(Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, Offload: offload, Address: netip.MustParsePrefix("198.18.0.2/24")},
		OutboundFunc(func(f []Frame) int { return send(&outB, f) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close(); client.Close(); server.Close() })
	oa, ob := bind(t, a, client.TX, client.RX), bind(t, b, server.RX, server.TX)
	outA.Store(&oa)
	outB.Store(&ob)
	return a, b
}

func TestIperfOverPacketStream(t *testing.T) {
	for _, offload := range []bool{false, true} {
		client, server := streamPair(t, offload)
		ln, err := server.Listen("tcp", ":5201")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		srvDone := make(chan error, 1)
		go func() { srvDone <- (&iperf.Server{Network: server, OneOff: true}).Serve(ctx, ln) }()
		rep, err := iperf.RunClient(ctx, iperf.ClientConfig{Network: client, Server: "198.18.0.2:5201", Duration: 500 * time.Millisecond, Reverse: true})
		if err == nil {
			err = <-srvDone
		}
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		st := server.Stats()
		t.Logf("offload %v: %.2f Gbit/s over a packet stream, %d frames sent, %d dropped", offload,
			rep.Received().BitsPerSecond/1e9, st.TxFrames.Load(), st.TxDropped.Load())
		if rep.Received().BitsPerSecond <= 0 {
			t.Fatal("no throughput")
		}
	}
}

// BenchmarkOverPacketStream is BenchmarkBackToBack with a real (heap-backed) packet-stream
// session and its eventfd signals between the two stacks.
func BenchmarkOverPacketStream(b *testing.B) {
	for _, bc := range []struct {
		name    string
		offload bool
	}{{"mtu1500", false}, {"gso", true}} {
		b.Run(bc.name, func(b *testing.B) {
			client, server := streamPair(b, bc.offload)
			benchBulkTCP(b, client, server, "198.18.0.2:9")
			st := client.Stats()
			b.ReportMetric(float64(st.TxDropped.Load()), "dropped")
		})
	}
}
