package main

import (
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components/nic_perf/nicperf"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router"
	"github.com/nicstack/nicstack/router/model"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

const twoDomains = `<config>
	<policy label="tx" domain="a"/>
	<policy label_prefix="rx" domain="b"/>
	<domain name="a" interface="10.0.1.1/24">
		<udp dst="10.0.2.0/24"> <permit-any domain="b"/> </udp>
	</domain>
	<domain name="b" interface="10.0.2.1/24"/>
</config>`

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func startLoop(t *testing.T, cfg string) *Loop {
	t.Helper()
	l, err := NewLoop(LoopOptions{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	n, err := config.ParseXML("test", []byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	m := model.Parse(n)
	if len(m.Problems) > 0 {
		t.Fatal(m.Problems)
	}
	l.Configure(m)
	go l.Run()
	t.Cleanup(func() { l.Stop(); l.Close() })
	return l
}

// peer is a heap session attached to the loop with a nic_perf on its client end.
type peer struct {
	cl   *packetstream.Client
	srv  *packetstream.Server
	a    *Attachment
	ctr  *nicperf.Counters
	stop atomic.Bool
	w    *packetstream.Waiter
	done sync.WaitGroup
}

func small() packetstream.Config {
	return packetstream.Config{QueueSize: 64, BulkSize: 64 * packetstream.BlockSize}
}

func attachPeer(t *testing.T, l *Loop, label string, cfg *nicperf.Config) *peer {
	t.Helper()
	cl, srv, err := packetstream.NewHeapSession(small(), small())
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{cl: cl, srv: srv, ctr: nicperf.NewCounters(nil)}
	if p.a, err = l.Attach(label, router.Nic, header.MAC{}, srv.RX, srv.TX, nil); err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		if p.w, err = packetstream.NewWaiter(cl.TX, cl.RX); err != nil {
			t.Fatal(err)
		}
		perf := nicperf.New(*cfg, p.ctr, quiet)
		p.done.Add(1)
		go func() { defer p.done.Done(); perf.Run(cl.TX, cl.RX, p.w, &p.stop) }()
	}
	t.Cleanup(func() { p.close(l) })
	return p
}

func (p *peer) close(l *Loop) {
	if p.a == nil {
		return
	}
	if p.w != nil {
		p.stop.Store(true)
		p.w.Wake()
		p.done.Wait()
		p.w.Close()
	}
	l.Detach(p.a)
	p.a = nil
	p.cl.Close()
	p.srv.Close()
}

func perfConfig(ip, dst [4]byte, tx bool) *nicperf.Config {
	return &nicperf.Config{MAC: header.MAC{2, 0, 0, 0, 0, ip[3]}, IP: ip, TX: tx, DstIP: dst,
		DstMAC: header.MAC{2, 2, 2, 2, 2, 0}, SrcPort: 40000, DstPort: 12345, Size: 128, Rate: 20000}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLoopForwardsUDPBetweenDomains(t *testing.T) {
	l := startLoop(t, twoDomains)
	rx := attachPeer(t, l, "rx", perfConfig([4]byte{10, 0, 2, 2}, [4]byte{}, false))
	attachPeer(t, l, "tx", perfConfig([4]byte{10, 0, 1, 2}, [4]byte{10, 0, 2, 2}, true))
	waitFor(t, "1000 frames through the router", func() bool { return rx.ctr.RxFrames.Load() >= 1000 })
	if rx.ctr.Answers.Load() == 0 {
		t.Error("the receiver answered no ARP request")
	}
}

// A client that stops taking and acknowledging frames fills its queue: frames to it are
// dropped and counted, and forwarding to others goes on.
func TestLoopDeafClientDoesNotStallOthers(t *testing.T) {
	l := startLoop(t, twoDomains)
	rx := attachPeer(t, l, "rx", perfConfig([4]byte{10, 0, 2, 2}, [4]byte{}, false))
	deaf := attachPeer(t, l, "rx-deaf", perfConfig([4]byte{10, 0, 2, 3}, [4]byte{}, false))
	attachPeer(t, l, "tx", perfConfig([4]byte{10, 0, 1, 2}, [4]byte{10, 0, 2, 2}, true))
	toDeaf := perfConfig([4]byte{10, 0, 1, 3}, [4]byte{10, 0, 2, 3}, true)
	toDeaf.SrcPort++
	attachPeer(t, l, "tx", toDeaf)
	waitFor(t, "frames to the client that turns deaf", func() bool { return deaf.ctr.RxFrames.Load() >= 100 })
	deaf.stop.Store(true) // its session stays attached; nobody reads it any more
	deaf.w.Wake()
	deaf.done.Wait()
	waitFor(t, "drops at the deaf client", func() bool { return l.Stats().DroppedFull.Load() > 0 })
	base := rx.ctr.RxFrames.Load()
	waitFor(t, "1000 more frames to the other client", func() bool { return rx.ctr.RxFrames.Load() >= base+1000 })
}

// A hundred and fifty Nic sessions opened and closed while traffic runs leave nothing behind: the
// interface count and the open file descriptors return to where they were.
func TestLoopSessionChurn(t *testing.T) {
	l := startLoop(t, twoDomains)
	rx := attachPeer(t, l, "rx", perfConfig([4]byte{10, 0, 2, 2}, [4]byte{}, false))
	attachPeer(t, l, "tx", perfConfig([4]byte{10, 0, 1, 2}, [4]byte{10, 0, 2, 2}, true))
	waitFor(t, "traffic", func() bool { return rx.ctr.RxFrames.Load() >= 100 })
	fds := openFDs(t)
	for range 150 {
		attachPeer(t, l, "tx", nil).close(l)
	}
	if n := l.ctr.interfaces.Load(); n != 2 {
		t.Errorf("%d interfaces after the churn, want 2", n)
	}
	if n := openFDs(t); n > fds {
		t.Errorf("%d open file descriptors after the churn, %d before", n, fds)
	}
	base := rx.ctr.RxFrames.Load()
	waitFor(t, "traffic after the churn", func() bool { return rx.ctr.RxFrames.Load() >= base+100 })
}

func openFDs(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// A sender faster than the router saturates it, and signals to the sleeping receiver are then
// coalesced: still every frame reaches it, during the burst and after it ends.
func TestLoopSaturatedSignalsReachSleepingClient(t *testing.T) {
	l := startLoop(t, twoDomains)
	rx := attachPeer(t, l, "rx", nil)
	rx.w, _ = packetstream.NewWaiter(rx.cl.TX, rx.cl.RX)
	rx.w.Spin = 0 // sleeps at once: it sees frames only through signals
	cfg := perfConfig([4]byte{10, 0, 2, 2}, [4]byte{}, false)
	perf := nicperf.New(*cfg, rx.ctr, quiet)
	rx.done.Add(1)
	go func() { defer rx.done.Done(); perf.Run(rx.cl.TX, rx.cl.RX, rx.w, &rx.stop) }()
	tx := perfConfig([4]byte{10, 0, 1, 2}, [4]byte{10, 0, 2, 2}, true)
	tx.Rate, tx.Duration = 0, 300*time.Millisecond
	start := time.Now()
	attachPeer(t, l, "tx", tx)
	waitFor(t, "frames during the burst", func() bool { return rx.ctr.RxFrames.Load() >= 1000 })
	sent := rx.a.Interface().Stats()
	waitFor(t, "every frame sent to the receiver, after the burst", func() bool {
		got := rx.ctr.RxFrames.Load() + rx.ctr.Answers.Load() + rx.ctr.Other.Load()
		return time.Since(start) > tx.Duration+50*time.Millisecond && got == sent.TxFrames.Load()
	})
}
