package main

import (
	"testing"

	"github.com/nicstack/nicstack/internal/testutil"
)

// A short `nicstack bench driver` prints the table and writes one JSON object per point with
// the documented keys; the numbers are the benchmark's business, not a test's.
func TestBenchDriverJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs six scenarios")
	}
	for _, c := range []string{"intel_nic_hw", "ipxe_nic", "nic_perf"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	points, _ := runBenchJSON(t, "TX doorbells/kframe", 6, []string{"rx_irq_throttle", "tx_batch", "irqs_per_s",
		"irqs_per_kframe", "tx_irqs", "doorbells_per_kframe", "driver_cpu", "hw_cpu", "mbps", "line_pct", "rx_overruns"},
		"driver", "--time", "200ms", "--spin", "0")
	for i, p := range points {
		if _, ok := p["tx_batch"].(bool); !ok {
			t.Errorf("point %d: tx_batch %v is not a bool", i, p["tx_batch"])
		}
	}
}
