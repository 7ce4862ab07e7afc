// Package iperf runs an iperf scenario once per point of the driver's matrix (rx_irq_throttle
// x tx_batch) and direction, and reports the guests' throughput against every component's
// CPU and the NIC's and streams' event rates, optionally against the same topology on Linux
// forwarding and on pasta. It is the harness of `nicstack bench iperf`, not the iperf
// implementation (github.com/nicstack/nicstack/iperf).
package iperf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/drivers/ipxe"
	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// throttle is an rx_irq_throttle value as given: an ITR interval or "adaptive".
type throttle string

// MarshalJSON writes an interval as a number, "adaptive" as a string.
func (t throttle) MarshalJSON() ([]byte, error) {
	if _, err := strconv.ParseUint(string(t), 10, 16); err == nil {
		return []byte(t), nil
	}
	return json.Marshal(string(t))
}

// Directions of the traffic, as --direction names them.
const (
	dirRX    = "rx"    // the far end sends, the guest receives (iperf3 -R): the seed's measurement
	dirTX    = "tx"    // the guest sends: the driver's TX path and its batching
	dirBidir = "bidir" // both at once (iperf3 --bidir); Mbit/s are both directions' sum
)

// point is one point of the matrix in one direction, as printed and written by --json: the
// medians of its runs. The driver's settings are null when the scenario has no ipxe_nic.
type point struct {
	// Reference names the --compare path a point measured (a guest scenario's, guestReferences,
	// runs in the matrix); empty for the scenario's.
	Reference     string    `json:"reference,omitempty"`
	Congestion    string    `json:"congestion,omitempty"` // the Linux iperf3s' TCP congestion control
	RxIrqThrottle *throttle `json:"rx_irq_throttle"`
	TxBatch       *bool     `json:"tx_batch"`
	Direction     string    `json:"direction"`
	IP            int       `json:"ip"`              // the IP version of the test: 4 or 6
	Flows         int       `json:"flows,omitempty"` // --flows: parallel streams per client (and direction)
	// LatencyGuest says who timed the round trips (--latency-guest): same, or separate
	LatencyGuest string             `json:"latency_guest,omitempty"`
	Runs         int                `json:"runs"`      // runs that measured; the figures are their medians
	Mbps         float64            `json:"mbps"`      // receiver side, as iperf reports it
	MbpsRuns     []float64          `json:"mbps_runs"` // each run's, in the order measured
	CPU          map[string]float64 `json:"cpu"`       // percent of one CPU per component, while traffic flowed
	IrqsPerS     float64            `json:"irqs_per_s"`
	// per 1000 frames the NIC sent: interrupts with a TX cause (TXDW, TXQE), TDT doorbells
	TxIrqsPerK    float64 `json:"tx_irqs_per_kframe"`
	DoorbellsPerK float64 `json:"doorbells_per_kframe"`
	SignalsPerK   float64 `json:"signals_per_kframe"` // packet-stream signals per 1000 frames through sessions
	RetransPerS   float64 `json:"retransmits_per_s"`  // TCP segments the senders sent again
	// ITRPercent is the share of the traffic time adaptive moderation spent in each latency
	// class (lowest, low, bulk); ITRChangesPerS how often it moved.
	ITRPercent     map[string]float64 `json:"itr_percent,omitempty"`
	ITRChangesPerS float64            `json:"itr_changes_per_s,omitempty"`
	Seconds        float64            `json:"seconds"` // measured traffic time of a run
	// EndsCPU is what the real iperf3s of netns guests used (both ends, as iperf3 reports it),
	// in percent of one CPU; GbitPerCPUSecond the throughput per CPU-second of the whole path,
	// components and ends: a cost a loaded machine's share of CPU does not move.
	EndsCPU          float64 `json:"ends_cpu,omitempty"`
	GbitPerCPUSecond float64 `json:"gbit_per_cpu_second,omitempty"`
	// With --latency: 1-byte round trips on the idle path (the figures the targets compare),
	// and every phase and size.
	RRP50us  float64 `json:"rr_p50_us,omitempty"`
	RRP99us  float64 `json:"rr_p99_us,omitempty"`
	RRP999us float64 `json:"rr_p999_us,omitempty"`
	// The same during the bulk test, and RRUL's figure: the runs' median of load p99 / idle
	// p99 (1 byte), and each run's. With --latency-guest separate they are guest B's.
	RRLoadP50us     float64    `json:"rr_load_p50_us,omitempty"`
	RRLoadP99us     float64    `json:"rr_load_p99_us,omitempty"`
	RRLoadP999us    float64    `json:"rr_load_p999_us,omitempty"`
	RRLoadRatio     float64    `json:"rr_p99_load_ratio,omitempty"`
	RRLoadRatioRuns []float64  `json:"rr_p99_load_ratio_runs,omitempty"`
	RR              []rrFigure `json:"rr,omitempty"`
	// FQCodel is the --fq-codel value of the point (on, off; empty: the scenario as
	// written), Queues each hop's queue while traffic flowed (fqcodel.go).
	FQCodel string `json:"fq_codel,omitempty"`
	// BQLLimitMax is the --bql-limit-max value of the point: the byte limits' cap, bytes.
	BQLLimitMax string `json:"bql_limit_max,omitempty"`
	// Rate is the --rate value of the point as given: each bulk TCP flow's -b (iperf3's
	// units); 0: unpaced.
	Rate  string `json:"rate,omitempty"`
	Pairs int    `json:"queue_pairs,omitempty"` // --queues: the vhost-user queue pairs
	// Affinity is the --affinity value of the point: as-written, or the starts it moved.
	Affinity string `json:"affinity,omitempty"`
	// PairShares is each pair's share of the frames through the vm's vhost-user device, both
	// ways, in percent: from its per-pair counters, which a device of one pair has not.
	PairShares []float64              `json:"pair_shares,omitempty"`
	Queues     map[string]queueFigure `json:"queues,omitempty"`
	Error      string                 `json:"error,omitempty"`
}

// The components the bench recognizes by their binary.
const (
	driverBinary   = "ipxe_nic"
	hardwareBinary = "intel_nic_hw"
	routerBinary   = "nic_router"
)

// linuxDrivers are the drivers of Linux interfaces, shown in the driver's column; only the
// ipxe_nic's config is patched.
var linuxDrivers = map[string]bool{"linux_nic": true, "packet_nic": true}

// Options are one invocation's settings.
type Options struct {
	Throttles  []string      // the driver's rx_irq_throttle values: ITR intervals or adaptive
	Batches    []string      // the driver's tx_batch values (yes, no)
	Directions []string      // rx, tx, bidir
	IPs        []string      // the IP versions of the tests: 4, 6 (family.go)
	Runs       int           // runs per point, in rounds over the matrix; medians are reported
	Time       time.Duration // iperf test time per run, measured
	// Omit is left out at each test's start, whole seconds (iperf3's -O): TCP's slow start,
	// whose length follows the round trip (an ITR interval adds to it), counts in neither
	// the throughput nor the components' CPU.
	Omit    time.Duration
	JSON    string   // also write the points to this file
	Plot    string   // draw throughput and CPU against the throttle value into this PNG
	Compare []string // reference paths to measure as well: kernel, pasta, NAME@MTU
	Latency bool     // also time request/response round trips (rr), idle and during the test
	// LatencyGuest is who times them: latencySame, the guest that runs the bulk test, or
	// latencySeparate, a second guest B beside it (latencyGuest) while it runs the bulk only.
	LatencyGuest string
	// Flows, when set, is a dimension of the matrix: each client's parallel bulk streams
	// (iperf -P), in each direction with bidir. Empty: the scenario's.
	Flows []int
	// UDPRate, when not 0, makes the test a UDP stream of that many 64-byte datagrams per
	// second instead of bulk TCP: a load that leaves the receiver time between frames, so that
	// the interrupt rate follows the driver's throttle rather than the receiver's speed.
	UDPRate int
	// Congestion, when set, is the TCP congestion control of every Linux iperf3 (iperf3 -C,
	// which the server takes from the client): the netns guests' and the references'. Empty:
	// each kernel's default. Pacing senders (BBR) and bursting ones (CUBIC) load a path of
	// batching components differently, so a comparison names the one it used.
	Congestion string
	// FQCodel, when set, runs every point once per value: on, <fq-codel/> in every domain of
	// the nic_router; off, none (fqcodel.go).
	FQCodel []string
	// BQLLimitMax, when set, runs every point once per value: the cap in bytes (0: none) of
	// the byte queue limits below the schedulers, the driver's tx_bql_limit_max and the far
	// end's when it has qdisc="fq_codel" (fqcodel.go).
	BQLLimitMax []string
	// Rates, when set, runs every point once per value: each bulk TCP flow's -b, iperf3's
	// bits per second per stream (500M, 1G; 0: unpaced), in both directions (with -R the
	// server paces, told by the client's test parameters). Empty: the scenario's. The --compare
	// references, measured once per direction, stay unpaced.
	Rates []string
	// Queues, when set, is a dimension of the matrix: the vhost-user queue pairs of the vm and
	// its QEMU guest (queues.go). Empty: the scenario's.
	Queues []int
	// Affinity, when set, runs every point once per placement (placement.go): as-written, or
	// "START=X+W[,Y+H] ..." moving those starts in the scenario's affinity space.
	Affinity []string
	bench.Components
}

// Who times the round trips, as --latency-guest names it.
const (
	latencySame     = "same"
	latencySeparate = "separate"
)

// iperfTest is one real iperf3 test: run measured after omit left out (iperf3's -t and -O),
// with TCP congestion control congestion (-C; empty: the kernel's default).
type iperfTest struct {
	run, omit  time.Duration
	congestion string
}

func (o Options) test() iperfTest { return iperfTest{o.Time, o.Omit, o.Congestion} }

// args are iperf3's options for it.
func (t iperfTest) args() []string {
	a := []string{"-t", strconv.Itoa(int(t.run.Seconds() + 0.5))}
	if t.omit > 0 {
		a = append(a, "-O", strconv.Itoa(int(t.omit.Seconds())))
	}
	if t.congestion != "" {
		a = append(a, "-C", t.congestion)
	}
	return a
}

// total is how long the test runs.
func (t iperfTest) total() time.Duration { return t.run + t.omit }

// setting is one point of the matrix before it is measured.
type setting struct {
	itr   *throttle
	batch *bool
	dir   string
	ref   string // a guest reference instead of the scenario (then itr and batch are nil)
	flows int    // the clients' parallel streams; 0: the scenario's
	ip    int    // the IP version of the test: 4 or 6
	fq    string // --fq-codel's on or off, "" without
	cap   string // --bql-limit-max's bytes, "" without
	rate  string // --rate's -b as given, "" without
	pairs int    // --queues: the vhost-user queue pairs; 0: the scenario's
	place string // an --affinity value, "" without
}

// Run runs the scenario at path --runs times per point of the matrix (once per direction if
// it has no ipxe_nic), in rounds so that a drift of the machine's speed spreads over every
// point, prints the tables and the references' ratios, and fails if a point failed.
func Run(ctx context.Context, out io.Writer, path string, o Options) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if errs := supervisor.Check(path, data, o.Bins, components.Table); len(errs) > 0 {
		return errors.Join(errs...)
	}
	if o.Omit < 0 || o.Omit%time.Second != 0 || o.Omit > iperf.MaxOmit*time.Second {
		return fmt.Errorf("--omit %v: iperf3 leaves out whole seconds, 0s to %ds", o.Omit, iperf.MaxOmit)
	}
	sc, err := loadScenario(path)
	if err != nil {
		return err
	}
	if err := o.checkCongestion(sc); err != nil {
		return err
	}
	if err := o.checkLatency(sc); err != nil {
		return err
	}
	matrix, refs, err := o.matrix(sc, path, out)
	if err != nil {
		return err
	}
	if err := sc.prepareGuests(ctx); err != nil {
		return err
	}
	if o.Verbose {
		bench.PrintLoad(out)
	}
	// The references run in every round after the matrix, so that each ratio compares runs
	// the machine's drift and load met alike.
	type refDir struct {
		ref  reference
		dir  string
		runs []point
		err  error
	}
	var refRuns []refDir
	for _, r := range refs {
		for _, dir := range o.Directions {
			refRuns = append(refRuns, refDir{ref: r, dir: dir})
		}
	}
	perRound := len(matrix) + len(refRuns)
	prog := newProgress(o.Runs*perRound, o.test().total(), o.Verbose)
	runs := make([][]point, len(matrix))
	for round := range o.Runs {
		for i, m := range matrix {
			prog.start(fmt.Sprintf("run %d of %d: %s", round*perRound+i+1, o.Runs*perRound, m))
			p, err := measure(ctx, sc, m, o, prog)
			prog.end()
			if ctx.Err() != nil {
				prog.finish()
				return ctx.Err()
			}
			if err != nil {
				p.Error = err.Error()
				prog.note(fmt.Sprintf("%s: run failed: %v", m, err))
			}
			runs[i] = append(runs[i], p)
		}
		for i := range refRuns {
			rr := &refRuns[i]
			prog.start(fmt.Sprintf("run %d of %d: %s, %s", round*perRound+len(matrix)+i+1, o.Runs*perRound, rr.ref, rr.dir))
			p, err := measureReference(ctx, rr.ref, o.test(), rr.dir)
			prog.end()
			if ctx.Err() != nil {
				prog.finish()
				return ctx.Err()
			}
			if err != nil {
				rr.err = err
				continue
			}
			rr.runs = append(rr.runs, p)
		}
	}
	prog.finish()
	points := make([]point, len(matrix))
	for i, m := range matrix {
		points[i] = medianPoint(runs[i])
		points[i].RxIrqThrottle, points[i].TxBatch, points[i].Direction, points[i].Reference = m.itr, m.batch, m.dir, m.ref
		points[i].Flows = m.flows
		points[i].IP = m.ip
		points[i].FQCodel = m.fq
		points[i].BQLLimitMax = m.cap
		points[i].Rate = m.rate
		points[i].Pairs = m.pairs
		points[i].Affinity = m.place
		if o.Latency {
			points[i].LatencyGuest = o.LatencyGuest
		}
	}
	writeTables(out, points, sc, o)
	writeFamilyRatios(out, points)
	writeFQCodel(out, points)
	writePairShares(out, points)
	for _, p := range points {
		if p.Reference != "" && p.Runs > 0 {
			writeComparison(out, points, reference{name: p.Reference}, p, nil)
		}
	}
	var refPoints []point
	for _, rr := range refRuns {
		if rr.err != nil {
			fmt.Fprintf(out, "--compare %s (%s): %d of %d runs measured; %v\n", rr.ref, rr.dir, len(rr.runs), o.Runs, rr.err)
		}
		if len(rr.runs) > 0 {
			rp := medianPoint(rr.runs)
			rp.Reference, rp.Direction, rp.IP = rr.ref.name, rr.dir, ipv4
			var gbit []float64
			for _, r := range rr.runs {
				if r.GbitPerCPUSecond > 0 {
					gbit = append(gbit, r.GbitPerCPUSecond)
				}
			}
			writeComparison(out, points, rr.ref, rp, gbit)
			refPoints = append(refPoints, rp)
		}
	}
	if o.Verbose {
		bench.PrintLoad(out)
	}
	if o.JSON != "" {
		// A QEMU guest's kernel has a default of its own, which the host does not know.
		cc := o.congestion()
		if sc.linuxTCP() {
			for i := range points {
				points[i].Congestion = cc
			}
		}
		for i := range refPoints {
			if o.Congestion != "" || !(reference{name: refPoints[i].Reference}).isQEMU() {
				refPoints[i].Congestion = cc
			}
		}
		if err := bench.WriteJSON(o.JSON, append(points, refPoints...)); err != nil {
			return err
		}
	}
	if o.Plot != "" {
		if err := drawPlot(o.Plot, points, refPoints); err != nil {
			return err
		}
	}
	for _, p := range points {
		if p.Error != "" {
			return errors.New("some points failed (see the table)")
		}
	}
	return nil
}

// matrix checks the options and lists the points: per direction, every throttle with every
// batch setting.
func (o *Options) matrix(sc *scenario, path string, out io.Writer) ([]setting, []reference, error) {
	if o.Runs < 1 {
		return nil, nil, fmt.Errorf("--runs %d: want at least 1", o.Runs)
	}
	if o.UDPRate < 0 {
		return nil, nil, fmt.Errorf("--udp-rate %d: want datagrams per second, or 0 for TCP", o.UDPRate)
	}
	if err := o.checkRates(); err != nil {
		return nil, nil, err
	}
	var refs []reference
	var guestRefs []string
	for _, c := range o.Compare {
		if _, ok := guestReferences[c]; ok {
			if !sc.inGuest() {
				return nil, nil, fmt.Errorf("--compare %s: only for a scenario that runs inside a QEMU guest (%s)", c, guestScenarioCommand)
			}
			guestRefs = append(guestRefs, c)
			continue
		}
		r, err := parseReference(c)
		if err != nil {
			return nil, nil, err
		}
		refs = append(refs, r)
	}
	for _, d := range o.Directions {
		switch d {
		case dirRX, dirTX, dirBidir:
		default:
			return nil, nil, fmt.Errorf("--direction %q: expected rx (the far end sends), tx (the guest sends) or bidir", d)
		}
	}
	itrs := make([]throttle, len(o.Throttles))
	for i, t := range o.Throttles {
		itr, adaptive, err := ipxe.ParseThrottle(t)
		if err != nil {
			return nil, nil, fmt.Errorf("--rx-irq-throttle: %v", err)
		}
		itrs[i] = throttle(strconv.FormatUint(uint64(itr), 10))
		if adaptive {
			itrs[i] = "adaptive"
		}
	}
	batches := make([]bool, len(o.Batches))
	for i, b := range o.Batches {
		switch b {
		case "yes", "true":
			batches[i] = true
		case "no", "false":
		default:
			return nil, nil, fmt.Errorf("--tx-batch %q: expected yes or no", b)
		}
	}
	flows := []int{0} // the scenario's
	if len(o.Flows) > 0 {
		flows = o.Flows
	}
	for _, f := range o.Flows {
		if f < 1 {
			return nil, nil, fmt.Errorf("--flows %d: want at least 1 parallel stream", f)
		}
	}
	ips, err := o.families()
	if err != nil {
		return nil, nil, err
	}
	if slices.Contains(ips, ipv6) {
		if err := sc.findTargets6(*o); err != nil {
			return nil, nil, err
		}
	}
	var matrix []setting
	for _, ip := range ips {
		for _, d := range o.Directions {
			for _, f := range flows {
				if sc.driver == nil {
					matrix = append(matrix, setting{dir: d, flows: f, ip: ip})
					continue
				}
				for i := range itrs {
					for j := range batches {
						matrix = append(matrix, setting{itr: &itrs[i], batch: &batches[j], dir: d, flows: f, ip: ip})
					}
				}
				for _, r := range guestRefs {
					matrix = append(matrix, setting{dir: d, ref: r, flows: f, ip: ip})
				}
			}
		}
	}
	if sc.driver == nil {
		fmt.Fprintf(out, "%s has no %s: one run per direction, the driver matrix does not apply\n", path, driverBinary)
	}
	fq, err := o.fqCodelValues(sc)
	if err != nil {
		return nil, nil, err
	}
	caps, err := o.bqlLimitMaxValues(sc)
	if err != nil {
		return nil, nil, err
	}
	matrix, err = o.withQueues(sc, matrix)
	if err != nil {
		return nil, nil, err
	}
	if sc.places, err = sc.parsePlacements(o.Affinity); err != nil {
		return nil, nil, err
	}
	matrix = withDimension(matrix, fq, func(m *setting, v string) { m.fq = v })
	matrix = withDimension(matrix, caps, func(m *setting, v string) { m.cap = v })
	matrix = withDimension(matrix, o.Rates, func(m *setting, v string) { m.rate = v })
	return withDimension(matrix, sc.places, func(m *setting, v placement) { m.place = v.value }), refs, nil
}

func (s setting) String() string {
	fq := ""
	if s.fq != "" {
		fq = " fq-codel=" + s.fq
	}
	if s.ip == ipv6 {
		return s.dir + " IPv6 " + s.label() + fq
	}
	return s.dir + " " + s.label() + fq
}

// label is the setting without its direction, for the lines under a direction's title.
func (s setting) label() string {
	var flows string
	if s.pairs > 0 {
		flows = fmt.Sprintf("queues=%d ", s.pairs)
	}
	if s.flows > 0 {
		flows += fmt.Sprintf("-P %d ", s.flows)
	}
	if s.place != "" {
		flows += fmt.Sprintf("affinity=%q ", s.place)
	}
	if s.cap != "" {
		flows += "bql_limit_max=" + s.cap + " "
	}
	if s.rate != "" {
		flows += "-b " + s.rate + " "
	}
	switch {
	case s.ref != "":
		return flows + "--compare " + s.ref
	case s.itr == nil:
		return flows + "scenario as written"
	}
	return fmt.Sprintf("%srx_irq_throttle=%s tx_batch=%s", flows, *s.itr, yesNo(*s.batch))
}

// checkRates checks --rate: iperf3's -b values, for bulk TCP only.
func (o *Options) checkRates() error {
	if len(o.Rates) > 0 && o.UDPRate > 0 {
		return fmt.Errorf("--rate %s: paces bulk TCP, and --udp-rate %d makes the test UDP", strings.Join(o.Rates, ","), o.UDPRate)
	}
	for _, v := range o.Rates {
		if _, _, err := iperf.ParseRate(v); err != nil {
			return fmt.Errorf("--rate %q: want iperf3's -b, bits per second per flow such as 500M or 1G (0: unpaced)", v)
		}
	}
	return nil
}

// pathCPU is the CPU of the whole path in percent of one CPU: every component and the ends.
func (p point) pathCPU() float64 {
	sum := p.EndsCPU
	for _, c := range p.CPU {
		sum += c
	}
	return sum
}

// gbitPerCPUSecond is mbps carried at cpu percent of one CPU, as Gbit per CPU-second.
func gbitPerCPUSecond(mbps, cpu float64) float64 {
	if cpu <= 0 {
		return 0
	}
	return mbps / 1000 / (cpu / 100)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// medianPoint is the median of each figure over the runs that measured; the first error if
// none did, or some did not.
func medianPoint(runs []point) point {
	var ok []point
	p := point{CPU: map[string]float64{}}
	for _, r := range runs {
		if r.Error != "" {
			if p.Error == "" {
				p.Error = r.Error
			}
			continue
		}
		ok = append(ok, r)
	}
	p.Runs = len(ok)
	if len(ok) == 0 {
		return p
	}
	for _, r := range ok {
		p.MbpsRuns = append(p.MbpsRuns, r.Mbps)
	}
	med := func(f func(point) float64) float64 { return bench.Median(ok, f) }
	p.Mbps = med(func(r point) float64 { return r.Mbps })
	p.IrqsPerS = med(func(r point) float64 { return r.IrqsPerS })
	p.TxIrqsPerK = med(func(r point) float64 { return r.TxIrqsPerK })
	p.DoorbellsPerK = med(func(r point) float64 { return r.DoorbellsPerK })
	p.SignalsPerK = med(func(r point) float64 { return r.SignalsPerK })
	p.RetransPerS = med(func(r point) float64 { return r.RetransPerS })
	p.ITRChangesPerS = med(func(r point) float64 { return r.ITRChangesPerS })
	p.Seconds = med(func(r point) float64 { return r.Seconds })
	p.EndsCPU = med(func(r point) float64 { return r.EndsCPU })
	p.GbitPerCPUSecond = med(func(r point) float64 { return r.GbitPerCPUSecond })
	for name := range ok[0].CPU {
		p.CPU[name] = med(func(r point) float64 { return r.CPU[name] })
	}
	p.setRR(ok)
	p.Queues = medianQueues(ok)
	p.PairShares = medianPairShares(ok)
	for class := range ok[0].ITRPercent {
		if p.ITRPercent == nil {
			p.ITRPercent = map[string]float64{}
		}
		p.ITRPercent[class] = med(func(r point) float64 { return r.ITRPercent[class] })
	}
	return p
}
