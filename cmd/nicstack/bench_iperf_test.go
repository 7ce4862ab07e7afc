package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/internal/testutil"
)

// A `nicstack bench iperf` of the seed scenario at a fixed and the adaptive throttle, the guest
// sending, prints the tables and writes one JSON object per point with the documented keys:
// rx_irq_throttle as given (a number, or "adaptive"), the direction, and for adaptive the
// time per latency class; --latency adds the round trips (idle only: a 1 s test has no room
// for them during it).
func TestBenchIperfJSON(t *testing.T) {
	for _, c := range []string{"vm", "remote_host", "nic_router", "intel_nic_hw", "ipxe_nic"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	points, b := runBenchJSON(t, "rx_irq_throttle  tx_batch  Mbit/s", 4,
		[]string{"rx_irq_throttle", "tx_batch", "direction", "mbps", "cpu", "irqs_per_s", "tx_irqs_per_kframe", "doorbells_per_kframe", "rr_p50_us", "rr_p99_us", "rr_p999_us", "rr"},
		"iperf", filepath.Join("..", "..", "deploy", "sculpt_iperf.hid"), "--time", "1s",
		"--omit", "1s", "--rx-irq-throttle", "651,adaptive", "--tx-batch", "yes", "--direction", "tx,bidir", "--latency")
	out := string(b)
	for _, want := range []string{"tx: the guest sends", "bidir: both send at once", "nic_router", "bench iperf: run 2 of 4: tx rx_irq_throttle=adaptive tx_batch=yes", "round trips in µs", "idle 1 KiB", "medians of 1 runs of 1s after 1s left out"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output", want)
		}
	}
	if strings.Contains(out, "load average") {
		t.Error("load average without -v")
	}
	if p := points[0]; p["rx_irq_throttle"] != 651.0 || p["tx_batch"] != true || p["direction"] != "tx" {
		t.Errorf("first point %v/%v/%v, want 651/true/tx", p["rx_irq_throttle"], p["tx_batch"], p["direction"])
	}
	if p := points[1]; p["rx_irq_throttle"] != "adaptive" || p["itr_percent"] == nil {
		t.Errorf("second point: rx_irq_throttle %v, itr_percent %v; want adaptive with the time per class", p["rx_irq_throttle"], p["itr_percent"])
	}
	if p := points[2]; p["direction"] != "bidir" || p["mbps"].(float64) <= 0 {
		t.Errorf("third point: direction %v, %v Mbit/s; want bidir with a throughput", p["direction"], p["mbps"])
	}
	if cpu, _ := points[0]["cpu"].(map[string]any); cpu["nic_drv"] == nil || cpu["nic_router"] == nil || cpu["intel_nic_hw"] == nil {
		t.Errorf("cpu %v: want the driver, the router and the hardware", points[0]["cpu"])
	}
	for _, line := range strings.Split(out, "\n") {
		if len([]rune(line)) > 100 {
			t.Errorf("line wider than 100 columns: %q", line)
		}
	}
	t.Logf("%s", b)
}

// --rate paces the bulk in both directions: rx, where the far end's server sends at the -b its
// client passed in the test's parameters, and tx, where the guest sends; the JSON names the
// rate. A rate can only be undershot on a slow host, so the bound above holds on any.
func TestBenchIperfRate(t *testing.T) {
	for _, c := range []string{"vm", "remote_host", "nic_router", "intel_nic_hw", "ipxe_nic"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	points, _ := runBenchJSON(t, "-b 50M", 2, []string{"rate", "mbps", "direction"},
		"iperf", filepath.Join("..", "..", "deploy", "sculpt_iperf.hid"), "--time", "2s", "--omit", "0s",
		"--rx-irq-throttle", "adaptive", "--tx-batch", "yes", "--direction", "rx,tx", "--rate", "50M")
	for _, p := range points {
		if mbps, _ := p["mbps"].(float64); p["rate"] != "50M" || mbps <= 0 || mbps > 1.1*50 {
			t.Errorf("%v: rate %v, %v Mbit/s; want at most 50 (and 10 %% for the first block)", p["direction"], p["rate"], p["mbps"])
		}
	}
}

// RRUL's shape with the round trips in a second guest: bulk both ways in 2 streams each
// (--flows 2 --direction bidir) from vm while vm_rr, a copy of it, times round trips during the
// test and idle after it; the JSON has both phases' percentiles and their ratio.
func TestBenchIperfLatencyGuest(t *testing.T) {
	for _, c := range []string{"vm", "remote_host", "nic_router", "intel_nic_hw", "ipxe_nic"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	points, b := runBenchJSON(t, "rx_irq_throttle  tx_batch  -P  Mbit/s", 1,
		[]string{"flows", "latency_guest", "rr_p99_us", "rr_load_p50_us", "rr_load_p99_us", "rr_load_p999_us", "rr_p99_load_ratio", "rr_p99_load_ratio_runs"},
		"iperf", filepath.Join("..", "..", "deploy", "sculpt_iperf.hid"), "--time", "3s", "--omit", "0s",
		"--rx-irq-throttle", "adaptive", "--tx-batch", "yes", "--direction", "bidir", "--flows", "2", "--latency", "--latency-guest", "separate")
	out := string(b)
	for _, want := range []string{"vm_rr, a second guest, while vm ran the bulk test alone", "p99 load/idle (runs)", "load 1 B"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output", want)
		}
	}
	p := points[0]
	if p["flows"] != 2.0 || p["latency_guest"] != "separate" || p["direction"] != "bidir" {
		t.Errorf("flows %v, latency_guest %v, direction %v: want 2, separate, bidir", p["flows"], p["latency_guest"], p["direction"])
	}
	load, idle, ratio := p["rr_load_p99_us"].(float64), p["rr_p99_us"].(float64), p["rr_p99_load_ratio"].(float64)
	if d := ratio - load/idle; d > 1e-9 || d < -1e-9 {
		t.Errorf("ratio %v, want load p99 %v / idle p99 %v of the one run", ratio, load, idle)
	}
	if cpu, _ := p["cpu"].(map[string]any); cpu["vm_rr"] == nil {
		t.Errorf("cpu %v: want guest B's", p["cpu"])
	}
	for _, line := range strings.Split(out, "\n") {
		if len([]rune(line)) > 100 {
			t.Errorf("line wider than 100 columns: %q", line)
		}
	}
	t.Logf("%s", b)
}
