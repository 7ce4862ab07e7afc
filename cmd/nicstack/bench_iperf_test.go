package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/internal/testutil"
)

// A one-point `nicstack bench iperf` of the seed scenario prints the seed's table and writes
// one JSON object per point with the documented keys, the driver's setting among them.
func TestBenchIperfJSON(t *testing.T) {
	for _, c := range []string{"vm", "remote_host", "nic_router", "intel_nic_hw", "ipxe_nic"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	points, b := runBenchJSON(t, "rx_irq_throttle=651 tx_batch=yes", 1,
		[]string{"rx_irq_throttle", "tx_batch", "mbps", "cpu", "irqs_per_s", "tx_irqs", "doorbells_per_kframe"},
		"iperf", filepath.Join("..", "..", "deploy", "sculpt_iperf.hid"), "--time", "1s", "--rx-irq-throttle", "651", "--tx-batch", "yes")
	if !strings.Contains(string(b), "router CPU") {
		t.Fatalf("no router CPU column:\n%s", b)
	}
	p := points[0]
	if p["rx_irq_throttle"] != 651.0 || p["tx_batch"] != true {
		t.Errorf("driver setting %v/%v, want 651/true", p["rx_irq_throttle"], p["tx_batch"])
	}
	if cpu, _ := p["cpu"].(map[string]any); cpu["nic_drv"] == nil || cpu["nic_router"] == nil || cpu["intel_nic_hw"] == nil {
		t.Errorf("cpu %v: want the driver, the router and the hardware", p["cpu"])
	}
	t.Logf("%s", b)
}
