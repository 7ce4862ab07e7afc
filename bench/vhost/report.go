package vhost

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/internal/testpmd"
)

// The two setups of a point.
const (
	Ours     = "nicstack" // vm -> nic_router -> vm
	Baseline = "baseline" // the same with Options.Baseline's binaries
	DPDK     = "dpdk"     // DPDK's vhost switch: testpmd, two net_vhost ports, io forwarding
)

// window is what one setup's measuring window counted: the generator's and the sink's port
// counters over it, and every process's CPU seconds.
type window struct {
	seconds float64
	sent    testpmd.PortStats // the generator's port, over the window
	got     testpmd.PortStats // the sink's port, over the window
	cpu     map[string]float64
	middle  []string          // the processes on the middle CPU (ours, or the switch)
	lost    map[string]uint64 // ours: frames each loss counter counted over the window
}

// Sample is one setup's figures of one run.
type Sample struct {
	Mpps          float64            `json:"delivered_mpps"`
	Gbps          float64            `json:"delivered_gbps"` // frames' bytes without FCS, at the sink
	SentMpps      float64            `json:"sent_mpps"`
	Loss          float64            `json:"loss"`       // (sent - delivered) / sent over the window
	CPU           map[string]float64 `json:"cpu"`        // percent of one CPU per process
	Middle        float64            `json:"middle_cpu"` // the middle CPU's processes, summed
	Total         float64            `json:"total_cpu"`
	MiddlePerMpps float64            `json:"middle_cpu_per_mpps"` // % of one CPU per delivered Mpps
	TotalPerMpps  float64            `json:"total_cpu_per_mpps"`
	// SentPerCPU is what the middle took from the generator per CPU it used, in Mpps per
	// whole CPU: its forwarding capacity, which the delivered rate hides when the sink loses
	// frames while it waits for the CPU it shares with the generator.
	SentPerCPU float64  `json:"sent_mpps_per_middle_cpu"`
	Queues     []uint64 `json:"sink_queue_frames"` // delivered per queue
	// Lost is, for ours, the frames each of the middle's loss counters ("vm_tx rx_dropped",
	// "nic_router dropped_full", ...) counted over the window, in Mpps.
	Lost map[string]float64 `json:"lost_mpps,omitempty"`
}

// sample turns a window's counts into rates. A window that delivered nothing has no CPU per
// Mpps (0).
func (w window) sample() Sample {
	s := Sample{CPU: map[string]float64{}}
	if w.seconds <= 0 {
		return s
	}
	s.Mpps = float64(w.got.RX.Packets) / w.seconds / 1e6
	s.Gbps = float64(w.got.RX.Bytes) * 8 / w.seconds / 1e9
	s.SentMpps = float64(w.sent.TX.Packets) / w.seconds / 1e6
	if w.sent.TX.Packets > 0 {
		s.Loss = 1 - float64(w.got.RX.Packets)/float64(w.sent.TX.Packets)
	}
	for name, sec := range w.cpu {
		pct := sec / w.seconds * 100
		s.CPU[name] = pct
		s.Total += pct
		if slices.Contains(w.middle, name) {
			s.Middle += pct
		}
	}
	if s.Mpps > 0 {
		s.MiddlePerMpps, s.TotalPerMpps = s.Middle/s.Mpps, s.Total/s.Mpps
	}
	if s.Middle > 0 {
		s.SentPerCPU = s.SentMpps / (s.Middle / 100)
	}
	for _, q := range w.got.Queues {
		s.Queues = append(s.Queues, q.RX.Packets)
	}
	for name, n := range w.lost {
		if s.Lost == nil {
			s.Lost = map[string]float64{}
		}
		s.Lost[name] = float64(n) / w.seconds / 1e6
	}
	return s
}

// Point is one frame size and queue count: the medians of both setups over the runs.
type Point struct {
	FrameBytes int    `json:"frame_bytes"` // testpmd's --txpkts: the frame without FCS
	Queues     int    `json:"queues"`
	Mergeable  bool   `json:"mergeable"`
	Runs       int    `json:"runs"`
	NotRun     string `json:"not_run,omitempty"` // why the point was not measured
	Ours       Sample `json:"nicstack"`
	DPDK       Sample `json:"dpdk"`
	// Ratios of ours to DPDK's: the median of the runs' ratios, each run against its own.
	RateRatio       float64 `json:"rate_ratio"`
	CPUPerMppsRatio float64 `json:"middle_cpu_per_mpps_ratio"`
	SentPerCPURatio float64 `json:"sent_mpps_per_middle_cpu_ratio"`
	// With Options.Baseline: its medians, and ours over the baseline's capacity (sent Mpps
	// per middle CPU) and delivered rate, the medians of the runs' ratios.
	Baseline           *Sample `json:"baseline,omitempty"`
	BaselineSentPerCPU float64 `json:"sent_mpps_per_middle_cpu_over_baseline,omitempty"`
	BaselineRate       float64 `json:"rate_over_baseline,omitempty"`
}

// median is the point of runs: every figure the median over the runs.
func median(frame, queues int, mergeable bool, ours, dpdk []Sample) Point {
	p := Point{FrameBytes: frame, Queues: queues, Mergeable: mergeable, Runs: len(ours),
		Ours: medianSample(ours), DPDK: medianSample(dpdk)}
	var rate, cpu, took []float64
	for i := range ours {
		if i < len(dpdk) && dpdk[i].SentPerCPU > 0 {
			took = append(took, ours[i].SentPerCPU/dpdk[i].SentPerCPU)
		}
		if i < len(dpdk) && dpdk[i].Mpps > 0 {
			rate = append(rate, ours[i].Mpps/dpdk[i].Mpps)
		}
		if i < len(dpdk) && dpdk[i].MiddlePerMpps > 0 && ours[i].MiddlePerMpps > 0 {
			cpu = append(cpu, ours[i].MiddlePerMpps/dpdk[i].MiddlePerMpps)
		}
	}
	id := func(v float64) float64 { return v }
	p.RateRatio, p.CPUPerMppsRatio, p.SentPerCPURatio = bench.Median(rate, id), bench.Median(cpu, id), bench.Median(took, id)
	return p
}

// baseline adds the baseline's runs to p, ours the same runs' own.
func (p *Point) baseline(ours, base []Sample) {
	b := medianSample(base)
	p.Baseline = &b
	var took, rate []float64
	for i := range ours {
		if i < len(base) && base[i].SentPerCPU > 0 {
			took = append(took, ours[i].SentPerCPU/base[i].SentPerCPU)
		}
		if i < len(base) && base[i].Mpps > 0 {
			rate = append(rate, ours[i].Mpps/base[i].Mpps)
		}
	}
	id := func(v float64) float64 { return v }
	p.BaselineSentPerCPU, p.BaselineRate = bench.Median(took, id), bench.Median(rate, id)
}

func medianSample(runs []Sample) Sample {
	med := func(f func(Sample) float64) float64 { return bench.Median(runs, f) }
	s := Sample{
		Mpps: med(func(s Sample) float64 { return s.Mpps }), Gbps: med(func(s Sample) float64 { return s.Gbps }),
		SentMpps: med(func(s Sample) float64 { return s.SentMpps }), Loss: med(func(s Sample) float64 { return s.Loss }),
		Middle: med(func(s Sample) float64 { return s.Middle }), Total: med(func(s Sample) float64 { return s.Total }),
		MiddlePerMpps: med(func(s Sample) float64 { return s.MiddlePerMpps }),
		TotalPerMpps:  med(func(s Sample) float64 { return s.TotalPerMpps }),
		SentPerCPU:    med(func(s Sample) float64 { return s.SentPerCPU }),
		CPU:           map[string]float64{},
	}
	for _, r := range runs {
		for name := range r.CPU {
			s.CPU[name] = med(func(s Sample) float64 { return s.CPU[name] })
		}
		for q := range r.Queues {
			for len(s.Queues) <= q {
				s.Queues = append(s.Queues, 0)
			}
			s.Queues[q] = uint64(med(func(s Sample) float64 {
				if q < len(s.Queues) {
					return float64(s.Queues[q])
				}
				return 0
			}))
		}
	}
	return s
}

// printRun is one run's line per setup.
func printRun(out io.Writer, size, queues, run int, setup string, s Sample) {
	fmt.Fprintf(out, "%5d B  q%d  run %d  %-8s  %7.3f Mpps  %6.2f Gbit/s  sent %7.3f Mpps  loss %5.1f%%  middle CPU %3.0f%% (%5.1f%%/Mpps, took %.2f Mpps/CPU)  %s  queues %v\n",
		size, queues, run, setup, s.Mpps, s.Gbps, s.SentMpps, s.Loss*100, s.Middle, s.MiddlePerMpps, s.SentPerCPU, cpuList(s.CPU), s.Queues)
	if len(s.Lost) > 0 {
		fmt.Fprintf(out, "%5d B  q%d  run %d  %-8s  lost in the middle (Mpps):", size, queues, run, setup)
		for _, name := range slices.Sorted(maps.Keys(s.Lost)) {
			fmt.Fprintf(out, "  %s %.3f", name, s.Lost[name])
		}
		fmt.Fprintln(out)
	}
}

func cpuList(cpu map[string]float64) string {
	var b strings.Builder
	for i, name := range slices.Sorted(maps.Keys(cpu)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s %.0f%%", name, cpu[name])
	}
	return b.String()
}

// printTable prints the medians, the ratios and whether the targets hold.
func printTable(out io.Writer, points []Point, runs int, busyPoll string) {
	fmt.Fprintf(out, "\nmedians of %d runs (ours/DPDK: the median of the runs' ratios). %s\n", runs, busyPoll)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "frame B\tq\tsetup\tMpps\tGbit/s\tloss %\tmiddle CPU %\tCPU %/Mpps\tsent Mpps/CPU\tall CPU %\tsink queues\t")
	for _, p := range points {
		if p.NotRun != "" {
			fmt.Fprintf(tw, "%d\t%d\tnot run\t\t\t\t\t\t\t\t\t\n", p.FrameBytes, p.Queues)
			continue
		}
		type row struct {
			name string
			s    Sample
		}
		rows := []row{{Ours, p.Ours}, {DPDK, p.DPDK}}
		if p.Baseline != nil {
			rows = []row{{Baseline, *p.Baseline}, {Ours, p.Ours}, {DPDK, p.DPDK}}
		}
		for _, r := range rows {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%.3f\t%.2f\t%.1f\t%.0f\t%.1f\t%.2f\t%.0f\t%v\t\n", p.FrameBytes, p.Queues, r.name,
				r.s.Mpps, r.s.Gbps, r.s.Loss*100, r.s.Middle, r.s.MiddlePerMpps, r.s.SentPerCPU, r.s.Total, r.s.Queues)
		}
		if p.Baseline != nil {
			fmt.Fprintf(tw, "%d\t%d\tours/baseline\t%.2f\t\t\t\t\t%.2f\t\t\t\n", p.FrameBytes, p.Queues, p.BaselineRate, p.BaselineSentPerCPU)
		}
		fmt.Fprintf(tw, "%d\t%d\tours/DPDK\t%.2f\t\t\t\t%.2f\t%.2f\t\t%s\t\n", p.FrameBytes, p.Queues, p.RateRatio, p.CPUPerMppsRatio, p.SentPerCPURatio, targets(p))
	}
	tw.Flush()
	for _, p := range points {
		if p.NotRun != "" {
			fmt.Fprintf(out, "%d B, %d queues not run: %s\n", p.FrameBytes, p.Queues, p.NotRun)
		}
	}
}

// targets says whether issue 32's targets hold: a delivered rate at least the switch's and
// CPU per delivered Mpps at most its.
func targets(p Point) string {
	var miss []string
	if p.RateRatio < 1 {
		miss = append(miss, "rate below DPDK's")
	}
	if p.CPUPerMppsRatio > 1 {
		miss = append(miss, "CPU/Mpps above DPDK's")
	}
	if len(miss) == 0 {
		return "targets met"
	}
	return strings.Join(miss, ", ")
}
