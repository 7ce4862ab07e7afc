package vhost

import (
	"math"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/internal/testpmd"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

// A window's counts become rates at the sink, the loss against what the generator sent, each
// process's CPU in percent of one CPU and the middle's CPU per delivered Mpps.
func TestWindowSample(t *testing.T) {
	w := window{seconds: 2,
		sent: testpmd.PortStats{TX: testpmd.Counts{Packets: 4e6, Bytes: 256e6}},
		got: testpmd.PortStats{RX: testpmd.Counts{Packets: 3e6, Bytes: 192e6},
			Queues: []testpmd.Queue{{RX: testpmd.Counts{Packets: 2e6}}, {RX: testpmd.Counts{Packets: 1e6}}}},
		cpu:    map[string]float64{"nic_router": 1.5, "vm_tx": 0.5, "gen": 1, "sink": 1},
		middle: []string{"nic_router", "vm_tx"}, lost: map[string]uint64{"nic_router dropped_full": 1e6}}
	s := w.sample()
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"Mpps", s.Mpps, 1.5}, {"Gbit/s", s.Gbps, 192e6 * 8 / 2 / 1e9}, {"sent Mpps", s.SentMpps, 2},
		{"loss", s.Loss, 0.25}, {"router CPU", s.CPU["nic_router"], 75}, {"middle", s.Middle, 100},
		{"total", s.Total, 200}, {"middle per Mpps", s.MiddlePerMpps, 100 / 1.5}, {"total per Mpps", s.TotalPerMpps, 200 / 1.5},
		{"sent per middle CPU", s.SentPerCPU, 2}, {"lost at the router", s.Lost["nic_router dropped_full"], 0.5},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if len(s.Queues) != 2 || s.Queues[0] != 2e6 || s.Queues[1] != 1e6 {
		t.Errorf("queues %v", s.Queues)
	}
	if z := (window{seconds: 1, cpu: map[string]float64{"switch": 1}, middle: []string{"switch"}}).sample(); z.Mpps != 0 || z.MiddlePerMpps != 0 || z.Loss != 0 {
		t.Errorf("nothing delivered: %+v, want no rate, no CPU per Mpps", z)
	}
}

// A point is the medians of the runs, and its ratios the medians of each run's ratio to its
// own DPDK run; the targets are named when missed.
func TestMedianPoint(t *testing.T) {
	ours := []Sample{{Mpps: 1, MiddlePerMpps: 100, SentPerCPU: 1}, {Mpps: 3, MiddlePerMpps: 30, SentPerCPU: 1}, {Mpps: 2, MiddlePerMpps: 60, SentPerCPU: 3}}
	dpdk := []Sample{{Mpps: 2, MiddlePerMpps: 50, SentPerCPU: 4}, {Mpps: 2, MiddlePerMpps: 50, SentPerCPU: 2}, {Mpps: 4, MiddlePerMpps: 25, SentPerCPU: 3}}
	p := median(64, 1, false, ours, dpdk)
	if p.Ours.Mpps != 2 || p.DPDK.Mpps != 2 || p.Runs != 3 {
		t.Errorf("medians %v and %v of %d runs", p.Ours.Mpps, p.DPDK.Mpps, p.Runs)
	}
	// Rate ratios 0.5, 1.5, 0.5; CPU ratios 2, 0.6, 2.4.
	// Capacity ratios 0.25, 0.5, 1.
	if !near(p.RateRatio, 0.5) || !near(p.CPUPerMppsRatio, 2) || !near(p.SentPerCPURatio, 0.5) {
		t.Errorf("ratios %v %v %v, want 0.5, 2 and 0.5", p.RateRatio, p.CPUPerMppsRatio, p.SentPerCPURatio)
	}
	if got := targets(p); !strings.Contains(got, "rate below") || !strings.Contains(got, "CPU/Mpps above") {
		t.Errorf("targets: %q", got)
	}
	if got := targets(Point{RateRatio: 1.1, CPUPerMppsRatio: 0.9}); got != "targets met" {
		t.Errorf("targets: %q", got)
	}
}

// With a baseline, its medians join the point, and ours over it is the median of each run's
// ratio to the baseline's run.
func TestBaselinePoint(t *testing.T) {
	ours := []Sample{{Mpps: 1, SentPerCPU: 2}, {Mpps: 3, SentPerCPU: 3}, {Mpps: 2, SentPerCPU: 4}}
	base := []Sample{{Mpps: 2, SentPerCPU: 1}, {Mpps: 2, SentPerCPU: 2}, {Mpps: 1, SentPerCPU: 8}}
	p := median(64, 1, false, ours, ours)
	p.baseline(ours, base)
	// Capacity ratios 2, 1.5, 0.5; rate ratios 0.5, 1.5, 2.
	if p.Baseline == nil || p.Baseline.SentPerCPU != 2 || !near(p.BaselineSentPerCPU, 1.5) || !near(p.BaselineRate, 1.5) {
		t.Errorf("baseline %+v, ratios %v %v, want capacity median 2, ratios 1.5 and 1.5", p.Baseline, p.BaselineSentPerCPU, p.BaselineRate)
	}
}
