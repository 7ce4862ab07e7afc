// Package scale is `nicstack bench scale`: N embedded guests behind one nic_router, each with
// one TCP stream to the far end at once, and how the figures of isolation under load grow
// with N: aggregate throughput and Jain's fairness index over the guests, memory per guest
// (PSS), the time until every guest holds its DHCP lease, the CPU of the idle scenario, and
// the router's CPU per Gbit/s.
package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// Options are one invocation's settings.
type Options struct {
	Scenario  string        // the base: one embedded guest with an iperf client, one far end with the server
	Guests    []int         // the numbers of guests to measure
	Time      time.Duration // each guest's test
	Idle      time.Duration // the idle window after the streams
	Direction string        // tx: the guests send (to the far end); rx: the far end sends (iperf -R)
	Domains   string        // shared: the guests in the base's domain; per-guest: a domain each
	// FarEndNice, when not 0, is the nice value the far end's process gets once the guests
	// hold their leases: it stands for another machine, and sharing a CPU with N guests at
	// nice 0 it gets 1/(N+1) of it, so that its share, not the router, bounds the streams.
	FarEndNice int
	// FarEndRxBuf, when set, is the far end's rx_buf_size (as its <config> takes it, "12M"):
	// the buffer of the stream the wire delivers into, which holds what arrives while the far
	// end waits for its share of the CPU.
	FarEndRxBuf string
	// FarEndCPU, when set, measures every number of guests once per value, in the same
	// rounds, with the far end where it says: scenario, as the base has it (the seed's: on
	// the guests' CPU); router, with the router's affinity, on a CPU no guest runs on.
	FarEndCPU []string
	// FQCodel, when set, measures every number of guests once per value, in the same rounds:
	// on, <fq-codel/> in every domain of the router (a scheduler class per guest at the
	// uplink's egress, docs/isolation.md); uplink, in the domains no guest is in; off, none.
	FQCodel []string
	Runs    int    // runs per number of guests, in rounds; medians are reported
	JSON    string // also write the points to this file
	Plot    string // draw the figures against the number of guests into this PNG
	bench.Components
}

// test is each guest's iperf test.
type test struct {
	time time.Duration
	rx   bool
	// start is when every guest's test starts (iperf_start), so that all run the whole
	// test together: started at each guest's lease, they began up to seconds apart, and the
	// window in which all ran was a third of the test at 32 guests, its shares still those
	// of the first guests' head start. Zero: each at its lease.
	start time.Time
}

// startAfter is how long after the scenario's start the guests' tests start: past the
// leases of n guests, which took 1.1 s for 1 guest, 1.4-1.6 s for 8 and 2.6-3.9 s for 32 on
// the shared 2-vCPU machine (docs/performance.md). A guest whose lease comes later starts
// at its lease, and the window in which all ran begins there.
func startAfter(n int) time.Duration { return 2*time.Second + time.Duration(n)*125*time.Millisecond }

func (o Options) test() test { return test{time: o.Time, rx: o.Direction == "rx"} }

// MiB is a mebibyte, the unit of the PSS figures.
const MiB = 1 << 20

// Point is one number of guests, as printed and written by --json: the medians of its runs.
type Point struct {
	Guests      int       `json:"guests"`
	Direction   string    `json:"direction"`
	Domains     string    `json:"domains"`
	FarEndNice  int       `json:"far_end_nice"`
	FarEndRxBuf string    `json:"far_end_rx_buf,omitempty"`
	FarEndCPU   string    `json:"far_end_cpu,omitempty"`
	FQCodel     string    `json:"fq_codel,omitempty"` // the --fq-codel value; empty: the scenario as written
	Runs        int       `json:"runs"`               // runs that measured
	Mbps        float64   `json:"mbps"`               // aggregate: the sum of the guests' results (receiver side)
	MbpsRuns    []float64 `json:"mbps_runs"`          // each run's aggregate
	// the slowest and the fastest guest of the run of median aggregate
	GuestMbpsMin float64 `json:"guest_mbps_min"`
	GuestMbpsMax float64 `json:"guest_mbps_max"`
	// that run's guests, in order: their tests' results, their throughput while all ran, and
	// the segments their TCP sent again
	GuestMbps        []float64 `json:"guest_mbps"`
	GuestSharedMbps  []float64 `json:"guest_shared_mbps"`
	GuestRetransmits []uint64  `json:"guest_retransmits"`
	// and when each guest's test began (its first 256 KiB), seconds after the tests' common
	// start, as the samples 500 ms apart saw it; -1: never
	GuestBegunSeconds []float64 `json:"guest_begun_s"`
	// that run's dropped frames (and PAUSE frames, xoff_rx) while the streams ran, by "start counter"
	Drops map[string]uint64 `json:"drops"`
	// Jain's index over the guests' throughputs while all their tests ran (the figure of
	// fairness), that window's aggregate and length; and Jain's index over the tests' own
	// results, which with staggered starts also counts the time a guest had the wire to fewer
	Jain          float64   `json:"jain"`
	JainRuns      []float64 `json:"jain_runs"`
	SharedMbps    float64   `json:"shared_mbps"`
	SharedSeconds float64   `json:"shared_seconds"`
	JainTests     float64   `json:"jain_tests"`
	// PSS of the guests' processes (mean and largest), and of every other start by name
	GuestPSSMiB    float64            `json:"guest_pss_mib"`
	GuestPSSMaxMiB float64            `json:"guest_pss_max_mib"`
	PSSMiB         map[string]float64 `json:"pss_mib"`
	// the guests' mean PSS at the end of the idle window, after the Go runtime had time to
	// return freed memory
	IdleGuestPSSMiB float64 `json:"idle_guest_pss_mib"`
	LeaseSeconds    float64 `json:"lease_seconds"` // scenario start until every guest held a lease
	DHCPSeconds     float64 `json:"dhcp_seconds"`  // the longest from a guest's link up to its lease
	// CPU over the idle window in percent of one CPU: every component, the guests together,
	// every other start by name, and the supervisor (the bench's process)
	IdleCPU           float64            `json:"idle_cpu"`
	IdleGuestsCPU     float64            `json:"idle_guests_cpu"`
	IdleCPUOf         map[string]float64 `json:"idle_cpu_of"`
	IdleSupervisorCPU float64            `json:"idle_supervisor_cpu"`
	// RouterCPUPerGbps is the router's CPU while the streams ran, in percent of one CPU per
	// Gbit/s carried: its CPU seconds over the gigabits the guests' tests carried, times 100.
	RouterCPUPerGbps float64 `json:"router_cpu_per_gbps"`
	Error            string  `json:"error,omitempty"`
}

// Run measures every number of guests --runs times, in rounds so that the machine's drift
// spreads over all, prints the table, the growth and the targets, and fails if a
// number of guests did not measure.
func Run(ctx context.Context, out io.Writer, o Options) error {
	if err := o.check(); err != nil {
		return err
	}
	data, err := os.ReadFile(o.Scenario)
	if err != nil {
		return err
	}
	if errs := supervisor.Check(o.Scenario, data, o.Bins, components.Table); len(errs) > 0 {
		return errors.Join(errs...)
	}
	b, err := loadBase(o.Scenario, data)
	if err != nil {
		return err
	}
	if o.Verbose {
		bench.PrintLoad(out)
	}
	var settings []setting
	for _, n := range o.Guests {
		for _, fq := range orNone(o.FQCodel) {
			for _, far := range orNone(o.FarEndCPU) {
				settings = append(settings, setting{n, fq, far})
			}
		}
	}
	runs := make([][]run, len(settings))
	errs := make([]error, len(settings))
	total := o.Runs * len(settings)
	for round := range o.Runs {
		for i, st := range settings {
			fmt.Fprintf(out, "bench scale: run %d of %d: %s ...", round*len(settings)+i+1, total, st)
			r, err := measure(ctx, b, st, o)
			if ctx.Err() != nil {
				fmt.Fprintln(out)
				return ctx.Err()
			}
			if err != nil {
				fmt.Fprintf(out, " failed: %v\n", err)
				errs[i] = err
				continue
			}
			fmt.Fprintf(out, " %.0f Mbit/s, Jain %.3f (all running %.1f s), of the tests %.3f; leases in %.2f s; tests begun %.1f-%.1f s after their start\n",
				sum(r.mbps), Jain(r.shared), r.sharedWindow.Seconds(), Jain(r.mbps), r.lease, slices.Min(r.begun), slices.Max(r.begun))
			runs[i] = append(runs[i], r)
		}
	}
	points := make([]Point, len(settings))
	for i, st := range settings {
		points[i] = medianPoint(st, o, runs[i], b.prefix)
		if len(runs[i]) == 0 && errs[i] != nil {
			points[i].Error = errs[i].Error()
		}
	}
	writeTable(out, points, o)
	if o.Verbose {
		bench.PrintLoad(out)
	}
	if o.JSON != "" {
		if err := bench.WriteJSON(o.JSON, points); err != nil {
			return err
		}
	}
	if o.Plot != "" {
		if err := drawPlot(o.Plot, points); err != nil {
			return err
		}
	}
	for _, p := range points {
		if p.Error != "" {
			return errors.New("some numbers of guests failed (see the table)")
		}
	}
	return nil
}

// setting is one point's: the number of guests, the --fq-codel value and the
// --far-end-cpu one (empty: not given).
type setting struct {
	n       int
	fq, far string
}

func (st setting) String() string {
	s := fmt.Sprintf("%d guests", st.n)
	if st.fq != "" {
		s += ", fq-codel " + st.fq
	}
	if st.far != "" {
		s += ", far end " + st.far
	}
	return s
}

// orNone is vs, or one empty value when there is none: a dimension not asked for.
func orNone(vs []string) []string {
	if len(vs) == 0 {
		return []string{""}
	}
	return vs
}

func (o Options) check() error {
	if o.Runs < 1 {
		return fmt.Errorf("--runs %d: want at least 1", o.Runs)
	}
	if len(o.Guests) == 0 {
		return errors.New("--guests: want at least one number")
	}
	for _, n := range o.Guests {
		if n < 1 || n > maxGuests {
			return fmt.Errorf("--guests %d: want 1 to %d", n, maxGuests)
		}
	}
	if o.Domains != domainsShared && o.Domains != domainsPerGuest {
		return fmt.Errorf("--domains %q: want %s or %s", o.Domains, domainsShared, domainsPerGuest)
	}
	for _, v := range o.FQCodel {
		if v != "on" && v != "off" && v != fqUplink {
			return fmt.Errorf("--fq-codel %q: expected on, off or %s", v, fqUplink)
		}
	}
	for _, v := range o.FarEndCPU {
		if v != farEndCPUScenario && v != farEndCPURouter {
			return fmt.Errorf("--far-end-cpu %q: want %s or %s", v, farEndCPUScenario, farEndCPURouter)
		}
	}
	if o.FarEndNice < -20 || o.FarEndNice > 19 {
		return fmt.Errorf("--far-end-nice %d: want -20 to 19", o.FarEndNice)
	}
	if o.Direction != "tx" && o.Direction != "rx" {
		return fmt.Errorf("--direction %q: want tx (the guests send) or rx (the far end sends)", o.Direction)
	}
	if o.Time < time.Second || o.Time%time.Second != 0 {
		return fmt.Errorf("--time %v: want whole seconds, at least 1s", o.Time)
	}
	if o.Idle <= 0 {
		return fmt.Errorf("--idle %v: want a positive window", o.Idle)
	}
	return nil
}

// maxGuests bounds --guests: each guest is a process and a port of the far end.
const maxGuests = 256

func sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

// medianPoint is the median of each figure over the runs of n guests.
func medianPoint(st setting, o Options, runs []run, prefix string) Point {
	p := Point{Guests: st.n, FQCodel: st.fq, Direction: o.Direction, Domains: o.Domains, FarEndNice: o.FarEndNice, FarEndRxBuf: o.FarEndRxBuf, FarEndCPU: st.far, Runs: len(runs), PSSMiB: map[string]float64{}, IdleCPUOf: map[string]float64{}}
	if len(runs) == 0 {
		return p
	}
	med := func(f func(run) float64) float64 { return bench.Median(runs, f) }
	isGuest := func(name string) bool { return guestNumber(name, prefix) > 0 }
	for _, r := range runs {
		p.MbpsRuns = append(p.MbpsRuns, sum(r.mbps))
	}
	p.Mbps = med(func(r run) float64 { return sum(r.mbps) })
	p.JainTests = med(func(r run) float64 { return Jain(r.mbps) })
	// fairness: of the runs that had a window in which every test ran
	var shared []run
	for _, r := range runs {
		if r.shared != nil {
			shared = append(shared, r)
			p.JainRuns = append(p.JainRuns, Jain(r.shared))
		}
	}
	p.Jain = bench.Median(shared, func(r run) float64 { return Jain(r.shared) })
	p.SharedMbps = bench.Median(shared, func(r run) float64 { return sum(r.shared) })
	p.SharedSeconds = bench.Median(shared, func(r run) float64 { return r.sharedWindow.Seconds() })
	// the spread of the run whose aggregate is nearest the median
	mid := runs[0]
	for _, r := range runs {
		if abs(sum(r.mbps)-p.Mbps) < abs(sum(mid.mbps)-p.Mbps) {
			mid = r
		}
	}
	p.GuestMbpsMin, p.GuestMbpsMax = slices.Min(mid.mbps), slices.Max(mid.mbps)
	p.GuestMbps, p.GuestSharedMbps, p.GuestRetransmits, p.Drops = mid.mbps, mid.shared, mid.retransmits, mid.drops
	p.GuestBegunSeconds = mid.begun
	meanPSS := func(pss map[string]float64) float64 {
		var s float64
		var k int
		for name, v := range pss {
			if isGuest(name) {
				s += v
				k++
			}
		}
		return s / float64(k) / MiB
	}
	p.GuestPSSMiB = med(func(r run) float64 { return meanPSS(r.pss) })
	p.IdleGuestPSSMiB = med(func(r run) float64 { return meanPSS(r.idlePSS) })
	p.GuestPSSMaxMiB = med(func(r run) float64 {
		var m float64
		for name, v := range r.pss {
			if isGuest(name) {
				m = max(m, v)
			}
		}
		return m / MiB
	})
	for name := range runs[0].pss {
		if !isGuest(name) {
			p.PSSMiB[name] = med(func(r run) float64 { return r.pss[name] / MiB })
		}
	}
	p.LeaseSeconds = med(func(r run) float64 { return r.lease })
	p.DHCPSeconds = med(func(r run) float64 { return r.dhcp })
	p.IdleCPU = med(func(r run) float64 { return sum(slices.Collect(maps.Values(r.idleCPU))) })
	p.IdleGuestsCPU = med(func(r run) float64 {
		var s float64
		for name, v := range r.idleCPU {
			if isGuest(name) {
				s += v
			}
		}
		return s
	})
	for name := range runs[0].idleCPU {
		if !isGuest(name) {
			p.IdleCPUOf[name] = med(func(r run) float64 { return r.idleCPU[name] })
		}
	}
	p.IdleSupervisorCPU = med(func(r run) float64 { return r.idleSelf })
	p.RouterCPUPerGbps = med(func(r run) float64 {
		if r.bytes == 0 {
			return 0
		}
		return r.routerCPUs * 100 / (float64(r.bytes) * 8 / 1e9)
	})
	return p
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
