package guests

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components/internal/guest"
	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/internal/rr"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

func privateCounters() *Counters {
	return NewCounters(func(string) *atomic.Uint64 { return new(atomic.Uint64) })
}

func command(t *testing.T, line string) *iperf.Command {
	t.Helper()
	c, err := iperf.ParseCommand(strings.Fields(line))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20 s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testEnv is a guest's env without a component: files it has written are dropped.
type testEnv struct{ *slog.Logger }

func (testEnv) WriteFile(string, []byte) {}

// Two embedded hosts on the two sides of one session: the client's iperf -R reaches the
// server (sending through its qdisc="fq_codel" too), both count the test, and a detach and
// re-attach (link down, up) keeps the hosts.
func TestHostsOverSession(t *testing.T) {
	for _, c := range []struct {
		offload bool
		qdisc   string
	}{{false, guest.QdiscNone}, {true, guest.QdiscNone}, {false, guest.QdiscFQCodel}, {true, guest.QdiscFQCodel}} {
		offload := c.offload
		log := testEnv{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		srvCtr, cliCtr := privateCounters(), privateCounters()
		srv, err := NewHost(guest.Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, MTU: 1500, Offload: offload, Qdisc: c.qdisc,
			Address: netip.MustParsePrefix("198.18.0.2/24"), Iperf: command(t, "-s")}, srvCtr, log)
		if err != nil {
			t.Fatal(err)
		}
		cli, err := NewHost(guest.Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 3}, MTU: 1500, Offload: offload,
			Address: netip.MustParsePrefix("198.18.0.3/24"), Iperf: command(t, "-c 198.18.0.2 -R -t 0.5")}, cliCtr, log)
		if err != nil {
			t.Fatal(err)
		}
		client, server, err := packetstream.NewHeapSession(packetstream.DefaultConfig(), packetstream.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if err := cli.Attach(client.TX, client.RX); err != nil {
			t.Fatal(err)
		}
		if err := srv.Attach(server.RX, server.TX); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the client's test", func() bool { return cliCtr.Tests.Load() > 0 })
		if cliCtr.Errors.Load() != 0 || cliCtr.Bps.Load() == 0 {
			t.Errorf("offload %v: client counted %d errors, %d bit/s", offload, cliCtr.Errors.Load(), cliCtr.Bps.Load())
		}
		waitFor(t, "the server's report", func() bool { return srvCtr.Tests.Load() > 0 })
		t.Logf("offload %v: %.0f Mbit/s over a heap session", offload, float64(cliCtr.Bps.Load())/1e6)
		cli.Detach()
		cli.Detach() // twice is harmless
		if err := cli.Attach(client.TX, client.RX); err != nil {
			t.Fatal(err)
		}
		cli.Close()
		srv.Close()
		client.Close()
		server.Close()
	}
}

// Two embedded hosts with static IPv6 addresses on one session: iperf -6 moves data between
// the static addresses, rr times round trips to the server's link-local address (from its
// MAC), and each host counts its two IPv6 addresses in use (link-local, static).
func TestHostsOverIPv6(t *testing.T) {
	log := testEnv{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	srvCtr, cliCtr := privateCounters(), privateCounters()
	srvMAC := net.HardwareAddr{2, 0, 0, 0, 0, 2}
	srvLL := netip.AddrFrom16(header.LinkLocal(header.MAC(srvMAC)))
	rrCmd, err := rr.ParseCommand(strings.Fields("-c " + srvLL.String() + " -6 -l 1,1K -t 0.2"))
	if err != nil {
		t.Fatal(err)
	}
	srvRR, _ := rr.ParseCommand(strings.Fields("-s -6"))
	srv, err := NewHost(guest.Config{MAC: srvMAC, MTU: 1500, Address6: netip.MustParsePrefix("2001:db8::2/64"),
		Iperf: command(t, "-s -6"), RR: srvRR}, srvCtr, log)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := NewHost(guest.Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 3}, MTU: 1500, Address6: netip.MustParsePrefix("2001:db8::3/64"),
		Iperf: command(t, "-c 2001:db8::2 -6 -t 0.5"), RR: rrCmd}, cliCtr, log)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	client, server, err := packetstream.NewHeapSession(packetstream.DefaultConfig(), packetstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { client.Close(); server.Close() }()
	if err := cli.Attach(client.TX, client.RX); err != nil {
		t.Fatal(err)
	}
	if err := srv.Attach(server.RX, server.TX); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the client's iperf test", func() bool { return cliCtr.Tests.Load() > 0 })
	if cliCtr.Errors.Load() != 0 || cliCtr.Bytes.Load() == 0 {
		t.Errorf("iperf over IPv6: %d errors, %d bytes", cliCtr.Errors.Load(), cliCtr.Bytes.Load())
	}
	waitFor(t, "the client's round trips", func() bool { return cliCtr.RRTests.Load()+cliCtr.RRErrors.Load() >= 2 })
	if cliCtr.RRErrors.Load() != 0 {
		t.Errorf("rr to %v: %d errors", srvLL, cliCtr.RRErrors.Load())
	}
	for name, ctr := range map[string]*Counters{"server": srvCtr, "client": cliCtr} {
		if n := ctr.IPv6Addresses.Load(); n != 2 {
			t.Errorf("%s: %d IPv6 addresses in use, want 2 (link-local, static)", name, n)
		}
	}
	t.Logf("iperf -6: %.0f Mbit/s over a heap session", float64(cliCtr.Bps.Load())/1e6)
}

// An rr client next to an iperf client times round trips during the test and then idle, each
// size in each phase, against an rr server on the far host.
func TestRoundTripsDuringAndAfterIperf(t *testing.T) {
	log := testEnv{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var mu sync.Mutex
	named := map[string]*atomic.Uint64{}
	counter := func(name string) *atomic.Uint64 {
		mu.Lock()
		defer mu.Unlock()
		if named[name] == nil {
			named[name] = new(atomic.Uint64)
		}
		return named[name]
	}
	rrCmd := func(line string) *rr.Command {
		c, err := rr.ParseCommand(strings.Fields(line))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		cfg   guest.Config
		tests uint64 // iperf tests the client runs
	}{
		{"beside its own iperf test", guest.Config{Iperf: command(t, "-c 198.18.0.2 -R -t 3")}, 1},
		// guest B of `bench iperf --latency-guest separate`: another guest's test for its times
		{"with rr_load_sec and no iperf client", guest.Config{RRLoad: 3 * time.Second}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clear(named)
			roundTrips(t, log, counter, rrCmd, tc.cfg, tc.tests)
		})
	}
}

// roundTrips runs a client of cfg (its addresses and rr added) against an rr and iperf server
// and checks both phases' figures.
func roundTrips(t *testing.T, log testEnv, counter func(string) *atomic.Uint64, rrCmd func(string) *rr.Command, cfg guest.Config, tests uint64) {
	srv, err := NewHost(guest.Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, MTU: 1500,
		Address: netip.MustParsePrefix("198.18.0.2/24"), Iperf: command(t, "-s"), RR: rrCmd("-s")}, privateCounters(), log)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctr := NewCounters(counter)
	cfg.MAC, cfg.MTU, cfg.Address = net.HardwareAddr{2, 0, 0, 0, 0, 3}, 1500, netip.MustParsePrefix("198.18.0.3/24")
	cfg.RR = rrCmd("-c 198.18.0.2 -l 1,1K -t 0.2")
	cli, err := NewHost(cfg, ctr, log)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	client, server, err := packetstream.NewHeapSession(packetstream.DefaultConfig(), packetstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	defer server.Close()
	if err := cli.Attach(client.TX, client.RX); err != nil {
		t.Fatal(err)
	}
	if err := srv.Attach(server.RX, server.TX); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "four rr tests", func() bool { return ctr.RRTests.Load()+ctr.RRErrors.Load() >= 4 })
	if ctr.RRErrors.Load() != 0 || ctr.Tests.Load() != tests {
		t.Fatalf("%d rr errors, %d iperf tests", ctr.RRErrors.Load(), ctr.Tests.Load())
	}
	for _, phase := range []string{"load", "idle"} {
		for _, size := range []string{"1", "1024"} {
			p := "rr_" + phase + "_" + size + "_"
			if counter(p+"transactions").Load() == 0 || counter(p+"p50_ns").Load() == 0 || counter(p+"p99_ns").Load() < counter(p+"p50_ns").Load() {
				t.Errorf("%s: %d transactions, p50 %d ns, p99 %d ns", p, counter(p+"transactions").Load(), counter(p+"p50_ns").Load(), counter(p+"p99_ns").Load())
			}
		}
	}
	t.Logf("1 byte round trips over a heap session: p99 %v idle, %v during iperf",
		time.Duration(counter("rr_idle_1_p99_ns").Load()), time.Duration(counter("rr_load_1_p99_ns").Load()))
}

// The old session of a restarted server that closes after its new one opened leaves the
// guest on the new one.
func TestCloseOfAnOldSessionKeepsTheNewLink(t *testing.T) {
	h, err := NewHost(guest.Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, MTU: 1500, Address: netip.MustParsePrefix("198.18.0.2/24")},
		privateCounters(), testEnv{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	e := &Embedded{c: component.New(component.Spec{Binary: "remote_host"}, slog.New(slog.DiscardHandler), nil), host: h}
	defer e.Stop()
	for id := uint64(1); id <= 2; id++ {
		client, server, err := packetstream.NewHeapSession(packetstream.DefaultConfig(), packetstream.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		defer server.Close()
		if err := e.Open(&component.Session{ID: id, Service: "Nic", Client: client, Role: component.Client}); err != nil {
			t.Fatal(err)
		}
	}
	e.Close(&component.Session{ID: 1})
	if h.port.Load() == nil {
		t.Fatal("the close of session 1 took down the link of session 2")
	}
	e.Close(&component.Session{ID: 2})
	if h.port.Load() != nil {
		t.Fatal("the link outlived its session")
	}
}

// A host with iperf_servers="2" serves two tests at once, one per port, where one server would
// tell the second client ACCESS_DENIED.
func TestIperfServersServeTestsAtOnce(t *testing.T) {
	log := testEnv{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	srvCtr := privateCounters()
	srv, err := NewHost(guest.Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, MTU: 1500,
		Address: netip.MustParsePrefix("198.18.0.2/24"), Iperf: command(t, "-s -p 5201"), IperfServers: 2}, srvCtr, log)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := NewHost(guest.Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 3}, MTU: 1500,
		Address: netip.MustParsePrefix("198.18.0.3/24")}, privateCounters(), log)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	client, server, err := packetstream.NewHeapSession(packetstream.DefaultConfig(), packetstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	defer server.Close()
	if err := cli.Attach(client.TX, client.RX); err != nil {
		t.Fatal(err)
	}
	if err := srv.Attach(server.RX, server.TX); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, port := range []string{"5201", "5202"} {
		wg.Go(func() {
			cfg := command(t, "-c 198.18.0.2 -t 1 -p "+port).ClientConfig(cli.Stack())
			if _, err := iperf.RunClient(t.Context(), cfg); err != nil {
				t.Errorf("port %s: %v", port, err)
			}
		})
	}
	wg.Wait()
	waitFor(t, "both servers' reports", func() bool { return srvCtr.Tests.Load() == 2 })
}
