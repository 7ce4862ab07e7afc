package scale

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// writeTable prints the medians per number of guests, the other components' figures, the
// growth from the fewest to the most guests and the targets.
func writeTable(out io.Writer, points []Point, o Options) {
	dir := "tx: the guests send to the far end"
	if o.Direction == "rx" {
		dir = "rx: the far end sends to the guests, iperf -R"
	}
	fmt.Fprintf(out, "\nbench scale: %s, N embedded guests behind one router (%s domains), each one TCP stream of %v\n", o.Scenario, o.Domains, o.Time)
	fmt.Fprintf(out, "at once (%s); idle CPU over %v after the streams; medians of %d runs\n", dir, o.Idle, o.Runs)
	if o.FarEndNice != 0 {
		fmt.Fprintf(out, "the far end runs at nice %d\n", o.FarEndNice)
	}
	if len(o.FarEndCPU) > 0 {
		fmt.Fprintln(out, "each number of guests once per --far-end-cpu value: scenario, the far end where the scenario puts it; router, with the router's affinity")
	}
	if o.FarEndRxBuf != "" {
		fmt.Fprintf(out, "the far end's rx_buf_size is %s\n", o.FarEndRxBuf)
	}
	if len(o.FQCodel) > 0 {
		fmt.Fprintln(out, "each number of guests once per --fq-codel value: on, <fq-codel/> in every domain of the router; uplink, in the uplink's alone; off, none")
	}
	w := 6 // the name column: as wide as the widest name ("32 uplink")
	for _, p := range points {
		w = max(w, len(p.name()))
	}
	fmt.Fprintf(out, "%-*s  tests' Mbit/s       all running     PSS/guest MiB     leases  idle CPU %%    router %%CPU\n", w, "guests")
	fmt.Fprintf(out, "%*s  sum  min-max  Jain  Mbit/s  s  Jain  mean (max) idle  s       all (guests)  per Gbit/s\n", w, "")
	for _, p := range points {
		if p.Runs == 0 {
			fmt.Fprintf(out, "%*s  failed: %s\n", w, p.name(), p.Error)
			continue
		}
		fmt.Fprintf(out, "%*s %4.0f %3.0f-%-4.0f %4.2f  %4.0f %4.1f %4.2f  %4.1f (%4.1f) %4.1f  %5.2f  %5.2f (%5.2f)  %6.1f\n",
			w, p.name(), p.Mbps, p.GuestMbpsMin, p.GuestMbpsMax, p.JainTests, p.SharedMbps, p.SharedSeconds, p.Jain,
			p.GuestPSSMiB, p.GuestPSSMaxMiB, p.IdleGuestPSSMiB, p.LeaseSeconds, p.IdleCPU, p.IdleGuestsCPU, p.RouterCPUPerGbps)
	}
	fmt.Fprintln(out, "the other processes, per number of guests: PSS MiB / idle CPU %")
	for _, p := range points {
		if p.Runs == 0 {
			continue
		}
		var f []string
		for _, name := range slices.Sorted(maps.Keys(p.PSSMiB)) {
			f = append(f, fmt.Sprintf("%s %.1f/%.2f", name, p.PSSMiB[name], p.IdleCPUOf[name]))
		}
		fmt.Fprintf(out, "%*s  %s; supervisor -/%.2f\n", w, p.name(), strings.Join(f, ", "), p.IdleSupervisorCPU)
	}
	for _, fq := range slices.Compact(slices.Sorted(slices.Values(orNone(o.FQCodel)))) {
		for _, far := range slices.Compact(slices.Sorted(slices.Values(orNone(o.FarEndCPU)))) {
			writeGrowth(out, points, fq, far)
		}
	}
	writeTargets(out, points)
}

// name is the point's in the table: its number of guests, with its --fq-codel and
// --far-end-cpu values.
func (p Point) name() string {
	s := fmt.Sprint(p.Guests)
	if p.FQCodel != "" {
		s += " " + p.FQCodel
	}
	if p.FarEndCPU != "" {
		s += " " + p.FarEndCPU
	}
	return s
}

// variant is what sets the point apart from the others of its number of guests, ", fq-codel
// X, far end Y", empty when nothing does.
func (p Point) variant() string {
	s := ""
	if p.FQCodel != "" {
		s += ", fq-codel " + p.FQCodel
	}
	if p.FarEndCPU != "" {
		s += ", far end " + p.FarEndCPU
	}
	return s
}

// writeGrowth prints each figure at the most guests over the fewest, of the points of one
// --fq-codel and --far-end-cpu value.
func writeGrowth(out io.Writer, points []Point, fq, far string) {
	var lo, hi *Point
	for i := range points {
		p := &points[i]
		if p.Runs == 0 || p.FQCodel != fq || p.FarEndCPU != far {
			continue
		}
		if lo == nil || p.Guests < lo.Guests {
			lo = p
		}
		if hi == nil || p.Guests > hi.Guests {
			hi = p
		}
	}
	if lo == nil || lo == hi {
		return
	}
	ratio := func(a, b float64) string {
		if a == 0 {
			return "-"
		}
		return fmt.Sprintf("x%.2f", b/a)
	}
	if v := lo.variant(); v != "" {
		fmt.Fprintf(out, "%s: ", v[2:])
	}
	fmt.Fprintf(out, "growth from %d to %d guests (x%.0f): aggregate %s, Jain %s, PSS/guest %s, leases %s, idle CPU %s, router CPU per Gbit/s %s\n",
		lo.Guests, hi.Guests, float64(hi.Guests)/float64(lo.Guests), ratio(lo.Mbps, hi.Mbps), ratio(lo.Jain, hi.Jain),
		ratio(lo.GuestPSSMiB, hi.GuestPSSMiB), ratio(lo.LeaseSeconds, hi.LeaseSeconds), ratio(lo.IdleCPU, hi.IdleCPU),
		ratio(lo.RouterCPUPerGbps, hi.RouterCPUPerGbps))
}

// The targets of issue 33 ("Isolation under load").
const (
	targetJain      = 0.95 // at 8 and 32 guests
	targetIdleCPU   = 2.0  // percent of one CPU, 32 idle guests together
	targetGuestPSS  = 12.0 // MiB per embedded guest
	targetLeaseTime = 3.0  // seconds, 32 guests
)

// writeTargets says for each target of the issue that a measured point reaches whether it is met.
func writeTargets(out io.Writer, points []Point) {
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "missed"
	}
	for _, p := range points {
		if p.Runs == 0 {
			continue
		}
		var f []string
		if p.Guests == 8 || p.Guests == 32 {
			f = append(f, fmt.Sprintf("Jain %.3f >= %.2f %s", p.Jain, targetJain, met(p.Jain >= targetJain)))
		}
		if p.Guests == 32 {
			f = append(f, fmt.Sprintf("idle guests %.2f%% <= %.0f%% %s", p.IdleGuestsCPU, targetIdleCPU, met(p.IdleGuestsCPU <= targetIdleCPU)),
				fmt.Sprintf("leases %.2f s (DHCP alone at most %.2f s) <= %.0f s %s", p.LeaseSeconds, p.DHCPSeconds, targetLeaseTime, met(p.LeaseSeconds <= targetLeaseTime)))
		}
		f = append(f, fmt.Sprintf("PSS/guest %.1f MiB (idle %.1f) <= %.0f MiB %s", p.GuestPSSMiB, p.IdleGuestPSSMiB, targetGuestPSS, met(p.GuestPSSMiB <= targetGuestPSS)))
		fmt.Fprintf(out, "targets at %d guests%s: %s\n", p.Guests, p.variant(), strings.Join(f, "; "))
	}
}
