package guest

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nicstack/nicstack/iperf"
	"github.com/nicstack/nicstack/runtime/config"
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

// Two embedded hosts on the two sides of one session: the client's iperf -R reaches the
// server, both count the test, and a detach and re-attach (link down, up) keeps the hosts.
func TestHostsOverSession(t *testing.T) {
	for _, offload := range []bool{false, true} {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		srvCtr, cliCtr := privateCounters(), privateCounters()
		srv, err := NewHost(Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, MTU: 1500, Offload: offload,
			Address: netip.MustParsePrefix("198.18.0.2/24"), Iperf: command(t, "-s")}, srvCtr, log)
		if err != nil {
			t.Fatal(err)
		}
		cli, err := NewHost(Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 3}, MTU: 1500, Offload: offload,
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

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		xml, err string
	}{
		{`<config guest="embedded" mtu="1500" iperf="-c 198.18.0.2 -R -t 10 -J"/>`, ""},
		{`<config address="198.18.0.2/24" iperf="-s" session="Uplink" uplink_mac="02:00:00:00:00:fe"/>`, ""},
		{`<config guest="netns" tap_address="10.0.1.2/24" exec="iperf3 -s"/>`, ""},
		{`<config guest="qemu"/>`, `guest="qemu"`},
		{`<config mtu="100"/>`, "mtu=100"},
		{`<config session="Uplink"/>`, "uplink_mac"},
		{`<config iperf="-c"/>`, "iperf="},
		{`<config guest="netns"/>`, "tap_address"},
	} {
		n, err := config.Parse("vm.xml", []byte(tc.xml))
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := ParseConfig(n, "vm")
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.xml, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one naming %q", tc.xml, err, tc.err)
		case tc.err != "" && !strings.Contains(err.Error(), "vm.xml:1:"):
			t.Errorf("%s: error %v does not name the file and line", tc.xml, err)
		case err == nil && len(cfg.MAC) != 6:
			t.Errorf("%s: no default MAC", tc.xml)
		}
	}
	a, b := defaultMAC("vm"), defaultMAC("vm2")
	if a.String() == b.String() || a[0]&2 == 0 {
		t.Errorf("default MACs %v, %v: want distinct, locally administered", a, b)
	}
}
