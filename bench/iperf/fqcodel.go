package iperf

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// --fq-codel on,off runs every point of the matrix with <fq-codel/> in every domain of the
// nic_router's config and qdisc="fq_codel" at the embedded far end, and without any, in the
// same rounds (docs/isolation.md), and prints
// what the targets compare: the 1-byte round trip under load against idle, the
// throughput with against without, and where each hop's queue stood while traffic flowed.

// fqCodelValues checks --fq-codel.
func (o *Options) fqCodelValues(sc *scenario) ([]string, error) {
	for _, v := range o.FQCodel {
		if v != "on" && v != "off" {
			return nil, fmt.Errorf("--fq-codel %q: expected on or off", v)
		}
	}
	if len(o.FQCodel) > 0 && sc.routerConfig() == nil {
		return nil, fmt.Errorf("--fq-codel: the scenario has no %s with a <config>", routerBinary)
	}
	return o.FQCodel, nil
}

// routerConfig is the nic_router's <config>, nil without one.
func (sc *scenario) routerConfig() *config.Node {
	for _, st := range sc.root.Subs("start") {
		if st.Name() == sc.roles[routerBinary] && startBinary(st) == routerBinary {
			return st.Sub("config")
		}
	}
	return nil
}

// patchFQCodel puts <fq-codel/> (defaults) into every domain of the router's config (on), or
// takes every <fq-codel> out (off); and gives the far end, an embedded guest with an iperf
// server, the egress of a Linux host's default qdisc (qdisc="fq_codel") or none: flow
// queueing at every hop where a scheduler stands, or nowhere. (The vm, which stands for a
// Linux VM, with qdisc="fq_codel" as well lost tx throughput, 0.85 of fq-codel off against
// 1.03 without, and its loaded p99 was no lower: docs/isolation.md.)
func (sc *scenario) patchFQCodel(v string) {
	cfg := sc.routerConfig()
	if cfg == nil || v == "" {
		return
	}
	for _, g := range sc.farEnds() {
		g.Set("qdisc", map[string]string{"on": "fq_codel", "off": "none"}[v])
	}
	bench.SetFQCodel(cfg, v == "on")
}

// farEnds are the <config>s of the embedded guests with an iperf server: those that take
// qdisc.
func (sc *scenario) farEnds() []*config.Node {
	var out []*config.Node
	for _, srv := range sc.servers {
		if srv.String("guest", "embedded") == "embedded" {
			out = append(out, srv)
		}
	}
	return out
}

// bqlLimitMax is the attribute of the byte limits' cap, the driver's and an embedded
// guest's (the router's <fq-codel> calls it bql_limit_max).
const bqlLimitMax = "tx_bql_limit_max"

// bqlLimitMaxValues checks --bql-limit-max: byte counts, as the configs write them.
func (o *Options) bqlLimitMaxValues(sc *scenario) ([]string, error) {
	for _, v := range o.BQLLimitMax {
		if _, err := config.ParseNumber(v); err != nil {
			return nil, fmt.Errorf("--bql-limit-max %q: expected a byte count (0: no cap)", v)
		}
	}
	if len(o.BQLLimitMax) > 0 && sc.driver == nil {
		return nil, fmt.Errorf("--bql-limit-max: the scenario has no %s", driverBinary)
	}
	return o.BQLLimitMax, nil
}

// patchBQLLimitMax caps the byte queue limits below the schedulers at v bytes: the driver's
// TX ring's, the router's below each <fq-codel> (bql_limit_max) and, where the far end has
// qdisc="fq_codel", the limit below it.
func (sc *scenario) patchBQLLimitMax(v string) {
	if v == "" || sc.driver == nil {
		return
	}
	sc.driver.Set(bqlLimitMax, v)
	if cfg := sc.routerConfig(); cfg != nil {
		for _, d := range cfg.Subs("domain") {
			for _, q := range d.Subs("fq-codel") {
				q.Set("bql_limit_max", v)
			}
		}
	}
	for _, g := range sc.farEnds() {
		if g.String("qdisc", "none") == "fq_codel" {
			g.Set(bqlLimitMax, v)
		} else {
			removeAttr(g, bqlLimitMax)
		}
	}
}

// queueFigure is where one hop's queue stood while traffic flowed: medians over the status
// samples of a run (then over the runs), and the largest sample.
type queueFigure struct {
	Frames    float64 `json:"frames"`
	Bytes     float64 `json:"bytes"`
	SojournUS float64 `json:"sojourn_us"`
	MaxFrames float64 `json:"max_frames"`
}

// queueSamples collects each hop's samples of one run, by "component: hop".
type queueSamples map[string][]supervisor.QueueStatus

func (q queueSamples) add(st supervisor.Status) {
	for _, c := range st.Components {
		for _, h := range c.Queues {
			k := c.Name + ": " + h.Hop
			q[k] = append(q[k], h)
		}
	}
}

func (q queueSamples) figures() map[string]queueFigure {
	if len(q) == 0 {
		return nil
	}
	out := map[string]queueFigure{}
	for k, s := range q {
		f := queueFigure{
			Frames:    bench.Median(s, func(h supervisor.QueueStatus) float64 { return float64(h.Frames) }),
			Bytes:     bench.Median(s, func(h supervisor.QueueStatus) float64 { return float64(h.Bytes) }),
			SojournUS: bench.Median(s, func(h supervisor.QueueStatus) float64 { return float64(h.Sojourn) / float64(time.Microsecond) }),
		}
		for _, h := range s {
			f.MaxFrames = max(f.MaxFrames, float64(h.Frames))
		}
		out[k] = f
	}
	return out
}

// medianQueues is the median of each hop's figures over runs.
func medianQueues(runs []point) map[string]queueFigure {
	out := map[string]queueFigure{}
	for _, r := range runs {
		for k := range r.Queues {
			var has []point
			for _, x := range runs {
				if _, ok := x.Queues[k]; ok {
					has = append(has, x)
				}
			}
			med := func(f func(queueFigure) float64) float64 {
				return bench.Median(has, func(p point) float64 { return f(p.Queues[k]) })
			}
			out[k] = queueFigure{
				Frames:    med(func(q queueFigure) float64 { return q.Frames }),
				Bytes:     med(func(q queueFigure) float64 { return q.Bytes }),
				SojournUS: med(func(q queueFigure) float64 { return q.SojournUS }),
				MaxFrames: med(func(q queueFigure) float64 { return q.MaxFrames }),
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// writeFQCodel prints, per direction and driver setting, the comparison of fq-codel
// on against off, and each hop's queue under load with both.
func writeFQCodel(out io.Writer, points []point) {
	type key struct{ dir, setting string }
	pairs := map[key][2]*point{}
	var keys []key
	for i := range points {
		p := &points[i]
		if p.FQCodel == "" || p.Runs == 0 {
			continue
		}
		bare := *p
		bare.FQCodel = ""
		k := key{p.Direction, bare.label()}
		if p.IP == ipv6 {
			k.setting += " IPv6"
		}
		pr, seen := pairs[k]
		if !seen {
			keys = append(keys, k)
		}
		if p.FQCodel == "on" {
			pr[0] = p
		} else {
			pr[1] = p
		}
		pairs[k] = pr
	}
	if len(keys) == 0 {
		return
	}
	fmt.Fprintln(out, "\nfq-codel on against off (issue 33's targets: loaded 1 B p99 at most 2x idle, throughput at least 0.97x)")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "direction\tsetting\tfq-codel\tMbit/s\tidle p99 µs\tload p99 µs\tload/idle\ton/off Mbit/s\t")
	for _, k := range keys {
		pr := pairs[k]
		for j, p := range pr {
			if p == nil {
				continue
			}
			ratio := "-"
			if j == 0 && pr[1] != nil && pr[1].Mbps > 0 {
				ratio = fmt.Sprintf("%.3f", p.Mbps/pr[1].Mbps)
			}
			idle, load := p.RRP99us, p.RRLoadP99us
			lr := "-"
			if p.RRLoadRatio > 0 {
				lr = fmt.Sprintf("%.1f", p.RRLoadRatio)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%.0f\t%.0f\t%s\t%s\t\n", k.dir, k.setting, p.FQCodel, p.Mbps, idle, load, lr, ratio)
		}
	}
	tw.Flush()
	fmt.Fprintln(out, "\nqueues while traffic flowed (medians of the status samples; max: the largest sample)")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "direction\tsetting\tfq-codel\thop\tframes\tbytes\tsojourn µs\tmax frames\t")
	for _, k := range keys {
		for _, p := range pairs[k] {
			if p == nil {
				continue
			}
			hops := make([]string, 0, len(p.Queues))
			for h, q := range p.Queues {
				if q.MaxFrames > 0 {
					hops = append(hops, h)
				}
			}
			sort.Strings(hops)
			for _, h := range hops {
				q := p.Queues[h]
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t\n", k.dir, k.setting, p.FQCodel, h, q.Frames, q.Bytes, q.SojournUS, q.MaxFrames)
			}
		}
	}
	tw.Flush()
}
