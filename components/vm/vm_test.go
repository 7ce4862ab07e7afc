package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// Scenario tests: the deploy/ iperf scenarios with real processes, the test shortened to 1 s.

// runScenario starts deploy/name with the replacements (old, new pairs) applied; the run ends
// with the test.
func runScenario(t *testing.T, name string, components []string, replace ...string) *scenariotest.Run {
	t.Helper()
	var dir string
	for _, c := range components {
		dir = filepath.Dir(testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c))
	}
	return scenariotest.Start(t, name, scenariotest.Deploy(t, name, replace...), supervisor.Options{BinDirs: []string{dir}})
}

// waitCounters waits until component's counter name is at least 1 and returns its counters.
func waitCounters(t *testing.T, s *supervisor.Supervisor, component, name string) map[string]uint64 {
	t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		st, ok := s.Status()
		if !ok {
			t.Fatal("the scenario ended")
		}
		for _, c := range st.Components {
			if c.Name == component && c.Counters[name] > 0 {
				return c.Counters
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s's %s stayed 0", component, name)
	return nil
}

func checkIperf(t *testing.T, s *supervisor.Supervisor) {
	t.Helper()
	vm := waitCounters(t, s, "vm", "iperf_tests")
	if vm["dhcp_leases"] != 1 || vm["iperf_errors"] != 0 || vm["iperf_bits_per_second"] == 0 {
		t.Errorf("vm counters %v: want one lease, no error, some throughput", vm)
	}
	srv := waitCounters(t, s, "remote_host", "iperf_tests")
	t.Logf("%.0f Mbit/s (remote_host counted %d bytes, vm %d)", float64(vm["iperf_bits_per_second"])/1e6, srv["iperf_bytes"], vm["iperf_bytes"])
}

// The embedded vm gets its address from nic_router's DHCP server and runs iperf -R through the
// router's NAT against remote_host on the uplink.
func TestEmbeddedThroughRouter(t *testing.T) {
	s := runScenario(t, "sculpt_iperf_direct.xml", []string{"vm", "remote_host", "nic_router"}, "-t 10", "-t 1").S
	checkIperf(t, s)
}

// The seed scenario: the same through the emulated NIC and its driver, where every hop
// reports its queue: the guests' stacks, the driver's rings and the emulated wire.
func TestEmbeddedThroughEmulatedNIC(t *testing.T) {
	s := runScenario(t, "sculpt_iperf.xml", []string{"vm", "remote_host", "nic_router", "intel_nic_hw", "ipxe_nic"}, "-t 10", "-t 1").S
	checkIperf(t, s)
	checkHops(t, s, map[string][]string{
		"vm": {"stack tx"}, "remote_host": {"stack tx"}, "nic_drv": {"tx ring", "rx ring"}, "intel_nic_hw": {"wire rx"},
	})
}

// checkHops checks that each component reports the hops named, and that every hop is sane:
// no more than a queue of the longest (the stack's 2048 packets) and only what waits has
// bytes and an age.
func checkHops(t *testing.T, s *supervisor.Supervisor, want map[string][]string) {
	t.Helper()
	st, ok := s.Status()
	if !ok {
		t.Fatal("the scenario ended")
	}
	for _, c := range st.Components {
		got := map[string]bool{}
		for _, q := range c.Queues {
			got[q.Hop] = true
			if q.Frames > 2048 || q.Sojourn < 0 || (q.Frames == 0 && (q.Bytes != 0 || q.Sojourn != 0)) {
				t.Errorf("%s: queue %+v", c.Name, q)
			}
		}
		for _, h := range want[c.Name] {
			if !got[h] {
				t.Errorf("%s reports no queue %q: %+v", c.Name, h, c.Queues)
			}
		}
		delete(want, c.Name)
	}
	for name := range want {
		t.Errorf("no component %q", name)
	}
}

// The netns guest (root): its iperf is the real iperf3 client in the namespace behind the vm's
// TAP (tried again until remote_host's server is reachable), measuring against remote_host's
// server.
func TestNetnsGuestRealIperf3(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "iperf3")
	run := runScenario(t, "sculpt_iperf_direct.xml", []string{"vm", "remote_host", "nic_router"},
		`<service name="LOG"/>`, `<service name="LOG"/> <service name="Tap"/>`,
		`<config guest="embedded" mtu="1500" iperf="-c 198.18.0.2 -R -t 10"/>`,
		`<config guest="netns" tap_address="10.0.1.2/24" tap_gateway="10.0.1.1" mtu="1500" offload="no" iperf="-c 198.18.0.2 -R -t 1"/>`)
	srv := waitCounters(t, run.S, "remote_host", "iperf_tests")
	if srv["iperf_errors"] != 0 || srv["iperf_bytes"] == 0 {
		t.Errorf("remote_host counters %v: want a test without error", srv)
	}
	// iperf3's summary, printed when its test ends (after remote_host counted it).
	done := func() bool { return strings.Contains(run.Logs.String(), "iperf Done.") }
	for deadline := time.Now().Add(10 * time.Second); !done() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if !done() || strings.Contains(run.Logs.String(), "iperf3: error") {
		t.Fatalf("want iperf3's summary without error:\n%s", run.Logs.String())
	}
	t.Logf("our server counted %d bytes at %.0f Mbit/s", srv["iperf_bytes"], float64(srv["iperf_bits_per_second"])/1e6)
}

// Our iperf client in the embedded vm against a real iperf3 server in a netns guest's
// namespace (root), through the router's NAT: the far end is the vm binary as a netns guest
// in the driver's place.
func TestEmbeddedAgainstRealIperf3Server(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "iperf3")
	s := runScenario(t, "sculpt_iperf_direct.xml", []string{"vm", "nic_router"},
		`<service name="LOG"/>`, `<service name="LOG"/> <service name="Tap"/>`,
		`<start name="remote_host">`, `<start name="remote_host"> <binary name="vm"/>`,
		`<config address="198.18.0.2/24" iperf="-s" session="Uplink"`,
		`<config guest="netns" netns="far" tap_address="198.18.0.2/24" offload="no" exec="iperf3 -s" session="Uplink"`,
		"-t 10", "-t 1").S
	vm := waitCounters(t, s, "vm", "iperf_tests")
	if vm["iperf_errors"] != 0 || vm["iperf_bytes"] == 0 {
		t.Errorf("vm counters %v: want a test without error", vm)
	}
	t.Logf("%.0f Mbit/s from a real iperf3 server", float64(vm["iperf_bits_per_second"])/1e6)
}
