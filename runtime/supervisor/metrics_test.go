package supervisor

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestFamilyOf(t *testing.T) {
	for counter, want := range map[string]family{
		"rx_bytes":              {name: "nicstack_rx_bytes_total", scale: 1},
		"tx_frames":             {name: "nicstack_tx_frames_total", scale: 1},
		"dropped":               {name: "nicstack_dropped_frames_total", scale: 1},
		"cpu_us":                {name: "nicstack_cpu_seconds_total", scale: 1e-6},
		"iperf_ms":              {name: "nicstack_iperf_seconds_total", scale: 1e-3},
		"interrupts":            {name: "nicstack_interrupts_total", scale: 1},
		"irq_rxt0":              {name: "nicstack_irq_rxt0_interrupts_total", scale: 1},
		"spurious_interrupts":   {name: "nicstack_spurious_interrupts_total", scale: 1},
		"first_reply_unix_ns":   {name: "nicstack_first_reply_timestamp_seconds", gauge: true, scale: 1e-9},
		"dhcp_leases":           {name: "nicstack_dhcp_leases", gauge: true, scale: 1},
		"iperf_bits_per_second": {name: "nicstack_iperf_bytes_per_second", gauge: true, scale: 1.0 / 8},
		"frames_sent":           {name: "nicstack_sent_frames_total", scale: 1},
		"doorbells":             {name: "nicstack_doorbells_total", scale: 1},
		"tx_bql_limit_bytes":    {name: "nicstack_tx_bql_limit_bytes", gauge: true, scale: 1},
		"xoff_rx":               {name: "nicstack_xoff_rx_frames_total", scale: 1},
		"tx_paused_us":          {name: "nicstack_tx_paused_seconds_total", scale: 1e-6},
	} {
		if got := familyOf(counter); got != want {
			t.Errorf("familyOf(%q) = %+v, want %+v", counter, got, want)
		}
	}
}

// The dashboard in deploy/ asks only for families the supervisor exports: its fixed ones,
// and those of the driver's and router's counters it charts.
func TestDashboardNamesExportedFamilies(t *testing.T) {
	data, err := os.ReadFile("../../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	known := map[string]bool{}
	for _, d := range []*prometheus.Desc{upDesc, restartsDesc, rssDesc, cpuDesc, ramDesc, quotaDesc, framesDesc, bytesDesc, dropsDesc, sigSentDesc, sigRecvDesc} {
		known[regexp.MustCompile(`fqName: "([a-z_]+)"`).FindStringSubmatch(d.String())[1]] = true
	}
	for _, c := range []string{"interrupts", "doorbells", "tx_frames", "dropped", "dropped_full"} {
		known[familyOf(c).name] = true
	}
	name := regexp.MustCompile(`nicstack_[a-z0-9_]+`)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				if !known[n] {
					t.Errorf("panel %q asks for %s, which nicstack does not export", p.Title, n)
				}
			}
		}
	}
}
