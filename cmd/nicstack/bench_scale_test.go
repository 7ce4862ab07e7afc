package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/internal/testutil"
)

// A `nicstack bench scale` of 1 and 2 guests of the seed scenario (no root needed) prints the
// table, the growth and the targets, and writes one JSON object per number of guests with
// figures in range: Jain's index of the tests in (0, 1], a PSS and a lease time for each, a
// throughput. A test of 2 s leaves no window in which both guests' tests surely ran: Jain's
// index over it is 0 (none) or in (0, 1].
func TestBenchScaleJSON(t *testing.T) {
	for _, c := range []string{"vm", "remote_host", "nic_router", "intel_nic_hw", "ipxe_nic"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	points, b := runBenchJSON(t, "tests' Mbit/s       all running", 2,
		[]string{"guests", "direction", "domains", "runs", "mbps", "jain", "jain_tests", "shared_mbps", "guest_mbps", "drops", "guest_pss_mib", "guest_pss_max_mib", "idle_guest_pss_mib", "pss_mib",
			"lease_seconds", "dhcp_seconds", "idle_cpu", "idle_guests_cpu", "idle_cpu_of", "idle_supervisor_cpu", "router_cpu_per_gbps", "guest_begun_s", "far_end_cpu"},
		"scale", "--scenario", filepath.Join("..", "..", "deploy", "sculpt_iperf.hid"), "--guests", "1,2", "--time", "2s", "--idle", "2s", "--runs", "1", "--far-end-cpu", "router")
	out := string(b)
	for _, want := range []string{"far end router: growth from 1 to 2 guests", "targets at 2 guests, far end router", "nic_router"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output", want)
		}
	}
	for i, p := range points {
		f := func(k string) float64 { v, _ := p[k].(float64); return v }
		if f("guests") != float64(i+1) || f("runs") != 1 || p["error"] != nil {
			t.Errorf("point %d: guests %v, runs %v, error %v", i, p["guests"], p["runs"], p["error"])
		}
		if j := f("jain_tests"); j <= 0 || j > 1 {
			t.Errorf("point %d: Jain of the tests %v, want (0, 1]", i, j)
		}
		if j := f("jain"); j < 0 || j > 1 {
			t.Errorf("point %d: Jain %v, want 0 or (0, 1]", i, j)
		}
		if f("mbps") <= 0 || f("guest_pss_mib") <= 0 || f("guest_pss_max_mib") < f("guest_pss_mib") || f("lease_seconds") <= 0 || f("router_cpu_per_gbps") <= 0 {
			t.Errorf("point %d: a figure out of range: %v", i, p)
		}
		if pss, _ := p["pss_mib"].(map[string]any); pss["nic_router"] == nil || pss["remote_host"] == nil || pss["vm1"] != nil {
			t.Errorf("point %d: pss_mib %v: want the router and the far end, not the guests", i, pss)
		}
	}
	t.Logf("%s", b)
}
