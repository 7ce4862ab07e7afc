package main

import (
	"encoding/json"
	"os"
	"os/exec"
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
	bin := testutil.Binary(t, "github.com/nicstack/nicstack/cmd/nicstack")
	out := filepath.Join(t.TempDir(), "iperf.json")
	cmd := exec.Command(bin, "bench", "iperf", filepath.Join("..", "..", "deploy", "sculpt_iperf.hid"),
		"--time", "1s", "--rx-irq-throttle", "651", "--tx-batch", "yes", "--json", out)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !strings.Contains(string(b), "router CPU") || !strings.Contains(string(b), "rx_irq_throttle=651 tx_batch=yes") {
		t.Fatalf("no table:\n%s", b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var points []map[string]any
	if err := json.Unmarshal(data, &points); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(points) != 1 {
		t.Fatalf("%d points, want 1", len(points))
	}
	p := points[0]
	for _, k := range []string{"rx_irq_throttle", "tx_batch", "mbps", "cpu", "irqs_per_s", "tx_irqs", "doorbells_per_kframe"} {
		if _, ok := p[k]; !ok {
			t.Errorf("the point lacks %q: %s", k, data)
		}
	}
	if p["rx_irq_throttle"] != 651.0 || p["tx_batch"] != true {
		t.Errorf("driver setting %v/%v, want 651/true", p["rx_irq_throttle"], p["tx_batch"])
	}
	if cpu, _ := p["cpu"].(map[string]any); cpu["nic_drv"] == nil || cpu["nic_router"] == nil || cpu["intel_nic_hw"] == nil {
		t.Errorf("cpu %v: want the driver, the router and the hardware", p["cpu"])
	}
	t.Logf("%s", b)
}
