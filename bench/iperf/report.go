package iperf

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"text/tabwriter"

	"github.com/nicstack/nicstack/bench"
)

// directionTitle says what a direction measures.
var directionTitle = map[string]string{
	dirRX:    "rx: the far end sends, the guest receives (iperf -R)",
	dirTX:    "tx: the guest sends, the far end receives",
	dirBidir: "bidir: both send at once (iperf --bidir), Mbit/s of both",
}

// writeTables prints, per direction, the seed's table (throughput against each component's
// CPU, the driver's, router's and hardware's first) and the table of event rates, then how
// adaptive moderation spent its time, and what failed.
func writeTables(out io.Writer, points []point, sc *scenario, o Options) {
	fixed := []string{sc.roles[driverBinary], sc.roles[routerBinary], sc.roles[hardwareBinary]}
	names := []string{}
	for _, n := range fixed {
		if n != "" {
			names = append(names, n)
		}
	}
	var others []string
	seen := map[string]bool{}
	for _, p := range points {
		for name := range p.CPU {
			if !seen[name] && name != fixed[0] && name != fixed[1] && name != fixed[2] {
				seen[name] = true
				others = append(others, name)
			}
		}
	}
	sort.Strings(others)
	names = append(names, others...)
	flows := len(o.Flows) > 0
	ips, _ := o.families() // checked by matrix
	for _, table := range tablesOf(ips, o.Directions) {
		dir, title := table.dir, directionTitle[table.dir]
		if f := familyName(table.ip, ips); f != "" {
			title += ", over " + f
		}
		var pts []point
		for _, p := range points {
			if p.Direction == dir && p.IP == table.ip {
				pts = append(pts, p)
			}
		}
		omitted := ""
		if o.Omit > 0 {
			omitted = fmt.Sprintf(" after %v left out", o.Omit)
		}
		fmt.Fprintf(out, "\n%s; medians of %d runs of %v%s\n", title, o.Runs, o.Time, omitted)
		if sc.linuxTCP() || len(o.Compare) > 0 {
			fmt.Fprintf(out, "%s in every Linux iperf3\n", o.congestionTitle())
		}
		fmt.Fprintln(out)
		fmt.Fprintln(out, "CPU in % of one core while traffic flowed")
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, settingHeader(flows)+"Mbit/s\t")
		for _, n := range names {
			fmt.Fprintf(tw, "%s\t", n)
		}
		fmt.Fprintln(tw)
		for _, p := range pts {
			fmt.Fprint(tw, p.settingColumns(flows))
			if p.Runs == 0 {
				fmt.Fprintln(tw, "failed\t")
				continue
			}
			fmt.Fprintf(tw, "%.0f\t", p.Mbps)
			for _, n := range names {
				if v, ok := p.CPU[n]; ok {
					fmt.Fprintf(tw, "%.0f\t", v)
				} else {
					fmt.Fprint(tw, "-\t")
				}
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, settingHeader(flows)+"irqs/s\tTX irqs/kframe\tdoorbells/kframe\tsignals/kframe\tretrans/s\t")
		for _, p := range pts {
			fmt.Fprint(tw, p.settingColumns(flows))
			if p.Runs == 0 {
				fmt.Fprintln(tw, "failed\t")
				continue
			}
			fmt.Fprintf(tw, "%.0f\t%.1f\t%.1f\t%.1f\t%.0f\t\n", p.IrqsPerS, p.TxIrqsPerK, p.DoorbellsPerK, p.SignalsPerK, p.RetransPerS)
		}
		tw.Flush()
		writeRRTable(out, pts, flows)
		for _, p := range pts {
			if p.ITRPercent != nil {
				fmt.Fprintf(out, "%s: ITR lowest/low/bulk/stream %.0f/%.0f/%.0f/%.0f %%, %.1f changes/s\n",
					p.label(), p.ITRPercent["lowest"], p.ITRPercent["low"], p.ITRPercent["bulk"], p.ITRPercent["stream"], p.ITRChangesPerS)
			}
		}
	}
	writeAdaptive(out, points, sc.roles[driverBinary])
	fmt.Fprintln(out, "\nirqs/s: the NIC's interrupts. Per 1000 frames the NIC sent: TX irqs, interrupts with a TX")
	fmt.Fprintln(out, "cause (TXDW or TXQE); doorbells, TDT writes. signals/kframe: packet-stream signals per 1000")
	fmt.Fprintln(out, "frames through the sessions. retrans/s: TCP segments sent again.")
	if sc.inGuest() {
		fmt.Fprintln(out, "In the QEMU guest: the components' CPU in % of one vCPU, guest the whole guest's (all vCPUs,")
		fmt.Fprintln(out, "/proc/stat), qemu QEMU's on the host; irqs/s and doorbells as the driver counts them (a")
		fmt.Fprintln(out, "reference: eth0's in /proc/interrupts); TX irqs are not told apart there.")
	}
	if o.Latency {
		fmt.Fprintln(out, "Round trips: request/response transactions (rr, TCP_RR-style) against the far end, timed by")
		if sc.rrGuest != nil {
			fmt.Fprintf(out, "%s, a second guest, while %s ran the bulk test alone.\n", sc.rrGuestName, sc.clients[0].name)
		} else {
			fmt.Fprintln(out, "the guest of the bulk test.")
		}
		fmt.Fprintf(out, "idle: %v per size after the test, load: during it. p99 load/idle: the median of the runs'\n", rrIdleTime)
		fmt.Fprintln(out, "ratios of the 1 B p99s (RRUL's figure: the delay bulk traffic adds to a sparse flow's).")
	}
	for _, p := range points {
		if p.Error != "" {
			fmt.Fprintf(out, "%s: %d of %d runs measured; %s\n", p.setting(), p.Runs, o.Runs, p.Error)
		}
	}
}

// settingHeader names the columns of settingColumns.
func settingHeader(flows bool) string {
	if flows {
		return "rx_irq_throttle\ttx_batch\t-P\t"
	}
	return "rx_irq_throttle\ttx_batch\t"
}

// settingColumns are the first columns of a row, each ended by a tab: the throttle, tx_batch,
// and with --flows the parallel streams.
func (p point) settingColumns(flows bool) string {
	fq := ""
	if p.FQCodel != "" {
		fq = ", fq-codel " + p.FQCodel
	}
	if p.Pairs > 0 {
		fq += fmt.Sprintf(", queues %d", p.Pairs)
	}
	if p.Affinity != "" {
		fq += ", affinity " + p.Affinity
	}
	if p.BQLLimitMax != "" {
		fq += ", bql_limit_max " + p.BQLLimitMax
	}
	if p.Rate != "" {
		fq += ", -b " + p.Rate
	}
	var s string
	switch {
	case p.Reference != "":
		s = p.Reference + "\t-\t"
	case p.RxIrqThrottle == nil:
		s = "as written\t-" + fq + "\t"
	default:
		s = fmt.Sprintf("%s\t%s%s\t", *p.RxIrqThrottle, yesNo(*p.TxBatch), fq)
	}
	if flows {
		s += fmt.Sprintf("%d\t", p.Flows)
	}
	return s
}

func (p point) setting() setting {
	return setting{itr: p.RxIrqThrottle, batch: p.TxBatch, dir: p.Direction, ref: p.Reference, flows: p.Flows, ip: p.IP, fq: p.FQCodel, cap: p.BQLLimitMax, rate: p.Rate, pairs: p.Pairs, place: p.Affinity}
}

func (p point) label() string { return p.setting().label() }

// writeComparison prints a reference path's result in one direction (rp, the median of its
// runs), its processes' CPU, and the ratio of every point of that direction to it: of the
// medians, and the range of the rounds' ratios when every round measured both. gbit are the
// reference's runs in Gbit per CPU-second of its whole path; when there are some, the points'
// cost is compared too.
func writeComparison(out io.Writer, points []point, ref reference, rp point, gbit []float64) {
	dir, runs, mbps := rp.Direction, rp.MbpsRuns, rp.Mbps
	perCPU := bench.Median(gbit, func(v float64) float64 { return v })
	fmt.Fprintf(out, "\n%s, %s, %s: %.0f Mbit/s", ref, ref.shape(), dir, mbps)
	if len(runs) > 1 {
		fmt.Fprintf(out, " (median of %d runs, %.0f-%.0f)", len(runs), slices.Min(runs), slices.Max(runs))
	}
	if perCPU > 0 {
		fmt.Fprintf(out, ", %.1f Gbit per CPU-second", perCPU)
	}
	fmt.Fprintln(out)
	if len(rp.CPU) > 0 {
		names := slices.Sorted(maps.Keys(rp.CPU))
		fmt.Fprint(out, "  CPU while the guest's iperf ran, % of one CPU (medians):")
		for _, n := range names {
			fmt.Fprintf(out, " %s %.0f", n, rp.CPU[n])
		}
		fmt.Fprintln(out)
	}
	for _, p := range points {
		if p.Direction != dir || p.Runs == 0 || mbps <= 0 || p.Reference != "" {
			continue
		}
		fmt.Fprintf(out, "  %-40s %6.0f Mbit/s = %.2f x %s", p.setting(), p.Mbps, p.Mbps/mbps, ref)
		if len(runs) > 1 && len(p.MbpsRuns) == len(runs) {
			lo, hi := math.Inf(1), 0.0
			for i, v := range runs {
				r := p.MbpsRuns[i] / v
				lo, hi = min(lo, r), max(hi, r)
			}
			fmt.Fprintf(out, " (rounds %.2f-%.2f)", lo, hi)
		}
		if perCPU > 0 && p.GbitPerCPUSecond > 0 {
			fmt.Fprintf(out, "; %.1f Gbit per CPU-second = %.2f x", p.GbitPerCPUSecond, p.GbitPerCPUSecond/perCPU)
		}
		fmt.Fprintln(out)
	}
}

// writeRRTable prints the points' round trips, if they have any: a row per phase and size,
// and on the 1 B load row the ratio of its p99 to the idle one (the median of the runs', and
// each run's).
func writeRRTable(out io.Writer, pts []point, flows bool) {
	if len(pts) == 0 || len(pts[0].RR) == 0 {
		return
	}
	fmt.Fprintln(out, "\nround trips in µs")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, settingHeader(flows)+"round trips\tp50\tp99\tp99.9\tp99 load/idle (runs)\t")
	for _, p := range pts {
		if len(p.RR) == 0 {
			fmt.Fprintln(tw, p.settingColumns(flows)+"-\t")
			continue
		}
		for _, f := range p.RR {
			ratio := ""
			if f.Phase == "load" && f.Bytes == rrSizes[0] && p.RRLoadRatio > 0 {
				ratio = fmt.Sprintf("%.2f (", p.RRLoadRatio)
				for i, r := range p.RRLoadRatioRuns {
					ratio += map[bool]string{true: " ", false: ""}[i > 0] + fmt.Sprintf("%.2f", r)
				}
				ratio += ")"
			}
			fmt.Fprintf(tw, "%s%s %s\t%.0f\t%.0f\t%.0f\t%s\t\n", p.settingColumns(flows), f.Phase, sizeName(f.Bytes), f.P50us, f.P99us, f.P999us, ratio)
		}
	}
	tw.Flush()
}

func sizeName(b int) string {
	if b >= 1024 && b%1024 == 0 {
		return fmt.Sprintf("%d KiB", b/1024)
	}
	return fmt.Sprintf("%d B", b)
}

// writeAdaptive compares rx_irq_throttle=adaptive with the fixed settings of its direction and
// tx_batch, in the terms of its targets: throughput against the best fixed setting's, the
// driver's CPU against the lowest, 1-byte round trips on the idle path against ITR 0's.
func writeAdaptive(out io.Writer, points []point, driver string) {
	var tw *tabwriter.Writer
	for _, a := range points {
		if a.RxIrqThrottle == nil || *a.RxIrqThrottle != "adaptive" || a.Runs == 0 {
			continue
		}
		var best, lowest, off *point
		for i := range points {
			f := &points[i]
			if f.RxIrqThrottle == nil || *f.RxIrqThrottle == "adaptive" || f.Runs == 0 || f.Direction != a.Direction || *f.TxBatch != *a.TxBatch {
				continue
			}
			if best == nil || f.Mbps > best.Mbps {
				best = f
			}
			if lowest == nil || f.CPU[driver] < lowest.CPU[driver] {
				lowest = f
			}
			if *f.RxIrqThrottle == "0" {
				off = f
			}
		}
		if best == nil {
			continue
		}
		if tw == nil {
			fmt.Fprintln(out, "\nadaptive against the fixed settings (targets: >= 0.97, <= 1.10, <= 1.10)")
			tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "direction\ttx_batch\tMbit/s / best\tdriver CPU / lowest\tidle 1 B p99 / ITR 0's\t")
		}
		p99 := "-"
		if off != nil && off.RRP99us > 0 && a.RRP99us > 0 {
			p99 = fmt.Sprintf("%.2f", a.RRP99us/off.RRP99us)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f (%s)\t%.2f (%s)\t%s\t\n", a.Direction, yesNo(*a.TxBatch),
			a.Mbps/best.Mbps, *best.RxIrqThrottle, a.CPU[driver]/lowest.CPU[driver], *lowest.RxIrqThrottle, p99)
	}
	if tw != nil {
		tw.Flush()
	}
}
