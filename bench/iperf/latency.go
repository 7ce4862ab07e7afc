package iperf

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// With --latency every embedded client also times request/response round trips (package
// rr) against an rr server on every iperf server: during the bulk test ("load") and then
// on the quiet path ("idle"), for each of rrSizes.

// With --latency-guest separate a second guest B, a copy of the client's <start> named after
// it (latencyGuestSuffix), times the round trips while the client A runs the bulk test alone:
// B times its "load" phase where A's test runs (rr_load_sec, rr_load_omit_sec: both start at
// their leases), then its idle one. B's round trips share the router, the driver and the wire
// with A's bulk traffic, not A's stack or socket.

// latencyGuestSuffix names guest B after A: vm_rr beside vm, so that a router policy of A's
// label prefix takes B too.
const latencyGuestSuffix = "_rr"

// checkLatency checks --latency and --latency-guest against the scenario; with a separate
// guest it adds B.
func (o *Options) checkLatency(sc *scenario) error {
	switch o.LatencyGuest {
	case "":
		o.LatencyGuest = latencySame
	case latencySame, latencySeparate:
	default:
		return fmt.Errorf("--latency-guest %q: want %s (the guest that runs the bulk test) or %s (a second guest beside it)", o.LatencyGuest, latencySame, latencySeparate)
	}
	if !o.Latency {
		if o.LatencyGuest == latencySeparate {
			return fmt.Errorf("--latency-guest %s: only with --latency", latencySeparate)
		}
		return nil
	}
	for _, c := range sc.clients {
		if c.netns != "" || c.guest != nil || c.vmArg != nil {
			return fmt.Errorf("--latency: %s is a netns or QEMU guest; round trips are timed by embedded guests on the host only", c.name)
		}
	}
	if o.LatencyGuest == latencySeparate {
		return sc.addLatencyGuest()
	}
	return nil
}

// addLatencyGuest adds guest B to the scenario: a copy of the one client's <start> without its
// tests, report and static addresses (B takes its own from DHCP and SLAAC, its MAC from its
// name), in the same session's place: same binary, route, affinity and router policy.
func (sc *scenario) addLatencyGuest() error {
	if len(sc.clients) != 1 {
		return fmt.Errorf("--latency-guest %s: want one guest that runs the iperf client, found %d", latencySeparate, len(sc.clients))
	}
	a := sc.clients[0]
	if a.cfg.Has("address") {
		return config.Errorf(a.cfg.Pos, "--latency-guest %s: %s has a static address, which its copy B would share: want a DHCP guest", latencySeparate, a.name)
	}
	name := a.name + latencyGuestSuffix
	for _, st := range sc.root.Subs("start") {
		if st.Name() == name {
			return config.Errorf(st.Pos, "--latency-guest %s: a start is named %s already, the name of guest B", latencySeparate, name)
		}
	}
	b := a.start.Clone()
	b.Set("name", name)
	if b.Sub("binary") == nil { // the start's name was its binary's
		b.Nodes = append(b.Nodes, &config.Node{Type: "binary", Pos: b.Pos, Attrs: []config.Attr{{Name: "name", Value: startBinary(a.start)}}})
	}
	cfg := b.Sub("config")
	for _, attr := range []string{"iperf", "rr", "report", "mac", "address6"} {
		removeAttr(cfg, attr)
	}
	sc.root.Nodes = append(sc.root.Nodes, b)
	sc.rrGuest, sc.rrGuestName = cfg, name
	return nil
}

// rrTimers are the starts that time round trips: guest B, or else the clients.
func (sc *scenario) rrTimers() []string {
	if sc.rrGuest != nil {
		return []string{sc.rrGuestName}
	}
	var names []string
	for _, c := range sc.clients {
		names = append(names, c.name)
	}
	return names
}

// rrSizes are the transaction sizes: TCP_RR's classic 1 byte, and 1 KiB.
var rrSizes = []int{1, 1024}

// rrIdleTime is how long each size is timed on the idle path: about 5000 round trips at
// ITR 0, so that a p99 rests on some 50 of them (with 1 s, ITR 0's own p99 moved by a fifth
// from one row to the next).
const rrIdleTime = 2 * time.Second

// rrPhases in the order the tables show them.
var rrPhases = []string{"idle", "load"}

// rrFigure is one phase and size's round trips, the medians of the runs' percentiles.
type rrFigure struct {
	Phase        string  `json:"phase"` // idle, or load (during the bulk test)
	Bytes        int     `json:"bytes"` // per request and per response
	P50us        float64 `json:"p50_us"`
	P99us        float64 `json:"p99_us"`
	P999us       float64 `json:"p999_us"`
	Transactions float64 `json:"transactions"`
}

// rrCommand is the rr client's command line of a client whose iperf goes to host.
func rrCommand(host string) string {
	var sizes []string
	for _, s := range rrSizes {
		sizes = append(sizes, strconv.Itoa(s))
	}
	return fmt.Sprintf("-c %s -l %s -t %g", host, strings.Join(sizes, ","), rrIdleTime.Seconds())
}

// rrTests is how many rr tests a client runs: each size idle, and during the bulk test when
// it lasts long enough for one: beyond its omitted seconds, or its first, and a last second
// (guests.Host.rrDuring).
func rrTests(t iperfTest) uint64 {
	if t.total()-time.Second > max(t.omit, time.Second) {
		return uint64(2 * len(rrSizes))
	}
	return uint64(len(rrSizes))
}

// rrWait is how long the bench waits for the rr tests after the iperf test ended.
const rrWait = 30 * time.Second

// readRR waits until every client finished its rr tests and reads their figures (of several
// clients, the worst percentiles).
func (sc *scenario) readRR(ctx context.Context, s *supervisor.Supervisor, t iperfTest) ([]rrFigure, error) {
	deadline := time.Now().Add(rrWait)
	for {
		st, ok := s.Status()
		if ok {
			figs, done, err := sc.rrFigures(st, rrTests(t))
			if err != nil || done {
				return figs, err
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the rr tests did not finish within %v of the iperf test (run with -v for the logs)", rrWait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (sc *scenario) rrFigures(st supervisor.Status, want uint64) ([]rrFigure, bool, error) {
	var figs []rrFigure
	for _, phase := range rrPhases {
		for _, size := range rrSizes {
			figs = append(figs, rrFigure{Phase: phase, Bytes: size})
		}
	}
	timers, clients := sc.rrTimers(), 0
	for _, c := range st.Components {
		for _, name := range timers {
			if c.Name != name {
				continue
			}
			if n := c.Counters["rr_errors"]; n > 0 {
				return nil, false, fmt.Errorf("%s: %d rr tests failed (run with -v for the logs)", c.Name, n)
			}
			if c.Counters["rr_tests"] < want {
				return nil, false, nil
			}
			clients++
			for i := range figs {
				f := &figs[i]
				name := fmt.Sprintf("rr_%s_%d_", f.Phase, f.Bytes)
				us := func(v string) float64 { return float64(c.Counters[name+v]) / 1e3 }
				f.P50us, f.P99us, f.P999us = max(f.P50us, us("p50_ns")), max(f.P99us, us("p99_ns")), max(f.P999us, us("p999_ns"))
				f.Transactions += float64(c.Counters[name+"transactions"])
			}
		}
	}
	return figs, clients == len(timers), nil
}

// rr1 is the 1-byte round trips of phase (idle: the figure the targets compare).
func (p point) rr1(phase string) (rrFigure, bool) {
	for _, f := range p.RR {
		if f.Phase == phase && f.Bytes == rrSizes[0] {
			return f, true
		}
	}
	return rrFigure{}, false
}

// loadRatio is the run's 1-byte p99 during the bulk test over its idle p99 (RRUL's figure:
// what the bulk traffic adds to a sparse flow's delay); 0 without both.
func (p point) loadRatio() float64 {
	load, ok1 := p.rr1("load")
	idle, ok2 := p.rr1("idle")
	if !ok1 || !ok2 || idle.P99us <= 0 || load.P99us <= 0 {
		return 0
	}
	return load.P99us / idle.P99us
}

// setRR sets the point's round trips to the runs' medians: each figure's, and the median of
// the runs' load ratios, each of which compares one run's two phases.
func (p *point) setRR(ok []point) {
	p.RR = medianRR(ok)
	if f, ok := p.rr1("idle"); ok {
		p.RRP50us, p.RRP99us, p.RRP999us = f.P50us, f.P99us, f.P999us
	}
	if f, ok := p.rr1("load"); ok {
		p.RRLoadP50us, p.RRLoadP99us, p.RRLoadP999us = f.P50us, f.P99us, f.P999us
	}
	var ratios []float64
	for _, r := range ok {
		if v := r.loadRatio(); v > 0 {
			ratios = append(ratios, v)
		}
	}
	p.RRLoadRatioRuns = ratios
	p.RRLoadRatio = bench.Median(ratios, func(v float64) float64 { return v })
}

// medianRR is the median of each figure over the runs (each measured the same figures).
func medianRR(ok []point) []rrFigure {
	if len(ok) == 0 || len(ok[0].RR) == 0 {
		return nil
	}
	out := make([]rrFigure, len(ok[0].RR))
	for i, f := range ok[0].RR {
		med := func(v func(rrFigure) float64) float64 {
			return bench.Median(ok, func(r point) float64 { return v(r.RR[i]) })
		}
		out[i] = rrFigure{Phase: f.Phase, Bytes: f.Bytes,
			P50us: med(func(f rrFigure) float64 { return f.P50us }), P99us: med(func(f rrFigure) float64 { return f.P99us }),
			P999us: med(func(f rrFigure) float64 { return f.P999us }), Transactions: med(func(f rrFigure) float64 { return f.Transactions })}
	}
	return out
}
