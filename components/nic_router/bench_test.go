package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components/nic_perf/nicperf"
	"github.com/nicstack/nicstack/router/model"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// BenchmarkRound measures the router's event loop per frame over two heap sessions, in one
// goroutine: a nic_perf step fills the sender's queue, one round routes it, a nic_perf step
// drains the receiver. router-ns/frame is the round alone: the router's share of a frame
// with the packet streams, without cross-CPU effects or scheduling. make pgo profiles it.
// go test compiles this package under its import path, which default.pgo does not name (it
// names the command's main.*): here the loop's own calls go without PGO, unlike in the binary.
func BenchmarkRound(b *testing.B) {
	for _, mode := range []string{"udp-forward", "nat"} {
		for _, size := range []int{64, 1500} {
			b.Run(fmt.Sprintf("%s/%d", mode, size), func(b *testing.B) { benchRound(b, mode, size) })
		}
	}
}

func benchRound(b *testing.B, mode string, size int) {
	rule, nat, dst := `<udp-forward port="12345" domain="b" to="10.0.2.2"/>`, "", [4]byte{10, 0, 1, 1}
	if mode == "nat" {
		rule, nat, dst = `<udp dst="10.0.2.0/24"> <permit-any domain="b"/> </udp>`, `<nat domain="a" udp-ports="100"/>`, [4]byte{10, 0, 2, 2}
	}
	l, err := NewLoop(LoopOptions{Log: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	n, err := config.ParseXML("bench", []byte(`<config>
		<policy label="tx" domain="a"/> <policy label="rx" domain="b"/>
		<domain name="a" interface="10.0.1.1/24">`+rule+`</domain>
		<domain name="b" interface="10.0.2.1/24">`+nat+`</domain>
	</config>`))
	if err != nil {
		b.Fatal(err)
	}
	m := model.Parse(n)
	if len(m.Problems) > 0 {
		b.Fatal(m.Problems)
	}
	l.Configure(m)
	stream := packetstream.DefaultConfig()
	type end struct {
		cl   *packetstream.Client
		srv  *packetstream.Server
		perf *nicperf.Perf
	}
	var ends [2]end
	for k, label := range []string{"tx", "rx"} {
		cl, srv, err := packetstream.NewHeapSession(stream, stream)
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		defer srv.Close()
		cfg := perfConfig([4]byte{10, 0, byte(k + 1), 2}, dst, k == 0)
		cfg.Size, cfg.Rate = size, 0
		ends[k] = end{cl, srv, nicperf.New(*cfg, nicperf.NewCounters(nil), quiet)}
		a, err := l.Attach(label, 0, [6]byte{}, srv.RX, srv.TX, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Detach(a)
	}
	tx, rx := ends[0], ends[1]
	step := func() {
		now := time.Now()
		tx.perf.Step(tx.cl.TX, tx.cl.RX, now)
		l.clock.now = now // as Run sets it before each round
		l.round()
		rx.perf.Step(rx.cl.TX, rx.cl.RX, now)
	}
	for range 100 { // ARP resolved, link state made
		step()
	}
	sent0 := l.Stats().Sent.Load()
	var inRound time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		now := time.Now()
		tx.perf.Step(tx.cl.TX, tx.cl.RX, now)
		t0 := time.Now()
		l.clock.now = t0
		l.round()
		inRound += time.Since(t0)
		rx.perf.Step(rx.cl.TX, rx.cl.RX, now)
	}
	frames := float64(l.Stats().Sent.Load() - sent0)
	if frames == 0 {
		b.Fatal("nothing routed")
	}
	b.ReportMetric(float64(inRound.Nanoseconds())/frames, "router-ns/frame")
	b.ReportMetric(frames/float64(b.N), "frames/op")
	b.ReportMetric(float64(l.Stats().DroppedFull.Load()), "dropped-full")
}
