package iperf

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
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
	for _, dir := range o.Directions {
		var pts []point
		for _, p := range points {
			if p.Direction == dir {
				pts = append(pts, p)
			}
		}
		fmt.Fprintf(out, "\n%s; medians of %d runs of %v\n\n", directionTitle[dir], o.Runs, o.Time)
		fmt.Fprintln(out, "CPU in % of one core while traffic flowed")
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "rx_irq_throttle\ttx_batch\tMbit/s\t")
		for _, n := range names {
			fmt.Fprintf(tw, "%s\t", n)
		}
		fmt.Fprintln(tw)
		for _, p := range pts {
			fmt.Fprintf(tw, "%s\t", p.settingColumns())
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
		fmt.Fprintln(tw, "rx_irq_throttle\ttx_batch\tirqs/s\tTX irqs/kframe\tdoorbells/kframe\tsignals/kframe\tretrans/s\t")
		for _, p := range pts {
			fmt.Fprintf(tw, "%s\t", p.settingColumns())
			if p.Runs == 0 {
				fmt.Fprintln(tw, "failed\t")
				continue
			}
			fmt.Fprintf(tw, "%.0f\t%.1f\t%.1f\t%.1f\t%.0f\t\n", p.IrqsPerS, p.TxIrqsPerK, p.DoorbellsPerK, p.SignalsPerK, p.RetransPerS)
		}
		tw.Flush()
		for _, p := range pts {
			if p.ITRPercent != nil {
				fmt.Fprintf(out, "%s: ITR lowest %.0f %%, low %.0f %%, bulk %.0f %%, %.1f changes/s\n",
					p.setting(), p.ITRPercent["lowest"], p.ITRPercent["low"], p.ITRPercent["bulk"], p.ITRChangesPerS)
			}
		}
	}
	fmt.Fprintln(out, "\nirqs/s: the NIC's interrupts. Per 1000 frames the NIC sent: TX irqs, interrupts with a TX")
	fmt.Fprintln(out, "cause (TXDW or TXQE); doorbells, TDT writes. signals/kframe: packet-stream signals per 1000")
	fmt.Fprintln(out, "frames through the sessions. retrans/s: TCP segments sent again.")
	for _, p := range points {
		if p.Error != "" {
			fmt.Fprintf(out, "%s: %d of %d runs measured; %s\n", p.setting(), p.Runs, o.Runs, p.Error)
		}
	}
}

// settingColumns are the first two columns of a row, tab-separated.
func (p point) settingColumns() string {
	if p.RxIrqThrottle == nil {
		return "as written\t-"
	}
	return fmt.Sprintf("%s\t%s", *p.RxIrqThrottle, yesNo(*p.TxBatch))
}

func (p point) setting() string { return setting{p.RxIrqThrottle, p.TxBatch, p.Direction}.String() }

// writeComparison prints a reference path's result in one direction and the ratio of every
// point of that direction to it.
func writeComparison(out io.Writer, points []point, dir string, ref reference, mbps float64) {
	fmt.Fprintf(out, "\n%s, %s, %s: %.0f Mbit/s\n", ref, ref.shape(), dir, mbps)
	for _, p := range points {
		if p.Direction == dir && p.Runs > 0 && mbps > 0 {
			fmt.Fprintf(out, "  %-40s %6.0f Mbit/s = %.2f x %s\n", p.setting(), p.Mbps, p.Mbps/mbps, ref)
		}
	}
}
