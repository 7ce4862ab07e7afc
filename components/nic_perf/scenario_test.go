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

// Genode's nic_perf tests with real processes: deploy/test_nic_perf.xml (two nic_perfs,
// directly) and deploy/test_nic_perf_router.xml (both behind nic_router), their periods
// shortened from 5 s to 300 ms. Each succeeds as Genode's does: nic_perf_tx exits with exit
// value 0 after count periods.

// startGenodeTest runs deploy/name with 300 ms periods and 4 of them for nic_perf_tx.
func startGenodeTest(t *testing.T, name string) *scenariotest.Run {
	for _, c := range []string{"nic_perf", "nic_router"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	bins := filepath.Dir(testutil.Binary(t, "github.com/nicstack/nicstack/components/nic_perf"))
	text := scenariotest.Deploy(t, name, `period_ms="5000" count="8"`, `period_ms="300" count="4"`,
		`period_ms="5000">`, `period_ms="300">`)
	// A child that ended is started again only after the test has looked at it.
	return scenariotest.Start(t, name, text, supervisor.Options{BinDirs: []string{bins}, MinBackoff: time.Minute, MaxBackoff: time.Minute})
}

// waitExit waits until the component called name has ended on its own and returns its exit
// value.
func waitExit(t *testing.T, r *scenariotest.Run, name string) int {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c := r.Component(name)
		if c.Restarts > 0 || (c.State != "starting" && c.State != "running") {
			return c.ExitCode
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still %s after 60 s", name, c.State)
		}
	}
}

// logs checks that the run's log holds each line, as the supervisor prefixes it.
func logs(t *testing.T, r *scenariotest.Run, lines ...string) {
	t.Helper()
	out := r.Logs.String()
	for _, l := range lines {
		if !strings.Contains(out, l) {
			t.Errorf("log lacks %q", l)
		}
	}
}

func TestGenodeNicPerf(t *testing.T) {
	r := startGenodeTest(t, "test_nic_perf.xml")
	if v := waitExit(t, r, "nic_perf_tx"); v != 0 {
		t.Fatalf("nic_perf_tx exited with exit value %d", v)
	}
	logs(t, r,
		`[nic_perf_rx] level=INFO msg="Got IP address 10.0.1.2"`, // nic_perf_tx's DHCP server
		"[nic_perf_tx] # Stats for session nic-client\n[nic_perf_tx]   Received ",
		"[nic_perf_rx] # Stats for session nic_perf_tx -> \n[nic_perf_rx]   Received ")
	if n := strings.Count(r.Logs.String(), "[nic_perf_tx] # Stats for session nic-client"); n != 4 {
		t.Errorf("nic_perf_tx logged %d periods, want 4 before its exit", n)
	}
	if n := r.Component("nic_perf_rx").Counters["rx_frames"]; n == 0 {
		t.Error("nic_perf_rx received no UDP")
	}
}

func TestGenodeNicPerfRouter(t *testing.T) {
	r := startGenodeTest(t, "test_nic_perf_router.xml")
	if v := waitExit(t, r, "nic_perf_tx"); v != 0 {
		t.Fatalf("nic_perf_tx exited with exit value %d", v)
	}
	logs(t, r,
		`[nic_perf_tx] level=INFO msg="Got IP address 10.0.1.2"`, // the router's DHCP servers, by label_suffix
		`[nic_perf_rx] level=INFO msg="Got IP address 10.0.2.2"`,
		"[nic_perf_rx] # Stats for session nic-client\n[nic_perf_rx]   Received ")
	if n := r.Component("nic_perf_rx").Counters["rx_frames"]; n == 0 {
		t.Error("nic_perf_rx received no UDP through the router's udp-forward")
	}
}
