package iperf

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// With --latency every embedded client also times request/response round trips (package
// rr) against an rr server on every iperf server: during the bulk test ("load") and then
// on the quiet path ("idle"), for each of rrSizes.

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
	clients := 0
	for _, c := range st.Components {
		for _, cl := range sc.clients {
			if c.Name != cl.name {
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
	return figs, clients == len(sc.clients), nil
}

// idleRR is the figure the must-show compares: 1-byte round trips on the idle path.
func (p point) idleRR() (rrFigure, bool) {
	for _, f := range p.RR {
		if f.Phase == "idle" && f.Bytes == rrSizes[0] {
			return f, true
		}
	}
	return rrFigure{}, false
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
