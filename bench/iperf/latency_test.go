package iperf

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/runtime/config"
)

// rrRun is a run's point with 1-byte round trips of idle and load p99 (0: not measured).
func rrRun(idle, load float64) point {
	p := point{Mbps: 900, CPU: map[string]float64{}}
	p.RR = []rrFigure{{Phase: "idle", Bytes: 1, P50us: idle / 2, P99us: idle, P999us: 2 * idle}}
	if load > 0 {
		p.RR = append(p.RR, rrFigure{Phase: "load", Bytes: 1, P50us: load / 2, P99us: load, P999us: 2 * load})
	} else {
		p.RR = append(p.RR, rrFigure{Phase: "load", Bytes: 1})
	}
	return p
}

// The load ratio is the median of the runs' own ratios (each compares one run's two phases),
// not the ratio of the medians; failed runs and runs without load figures count in neither.
func TestLoadRatio(t *testing.T) {
	failed := rrRun(1, 1000)
	failed.Error = "boom"
	p := medianPoint([]point{rrRun(100, 150), rrRun(200, 500), failed, rrRun(300, 300)})
	if p.RRP99us != 200 || p.RRLoadP99us != 300 || p.RRLoadP50us != 150 || p.RRLoadP999us != 600 {
		t.Errorf("p99 idle %v, load %v/%v/%v: want 200, 150/300/600", p.RRP99us, p.RRLoadP50us, p.RRLoadP99us, p.RRLoadP999us)
	}
	if p.RRLoadRatio != 1.5 || !slices.Equal(p.RRLoadRatioRuns, []float64{1.5, 2.5, 1}) {
		t.Errorf("ratio %v (runs %v), want 1.5 of 1.5 2.5 1 (the ratio of the medians would be 1.5 too only by chance: 300/200)", p.RRLoadRatio, p.RRLoadRatioRuns)
	}
	if q := medianPoint([]point{rrRun(100, 300), rrRun(100, 0), rrRun(400, 400)}); q.RRLoadRatio != 2 || len(q.RRLoadRatioRuns) != 2 {
		t.Errorf("ratio %v of %v: want 2, the median of 3 and 1, without the run that timed no load", q.RRLoadRatio, q.RRLoadRatioRuns)
	}
	if q := medianPoint([]point{{Mbps: 1}}); q.RRLoadRatio != 0 || q.RRLoadRatioRuns != nil {
		t.Errorf("no round trips: ratio %v %v", q.RRLoadRatio, q.RRLoadRatioRuns)
	}
}

// --flows is a dimension of the matrix inside each direction, and reaches the client as -P.
func TestFlows(t *testing.T) {
	sc, err := loadScenario("../../deploy/sculpt_iperf.hid")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Throttles: []string{"adaptive"}, Batches: []string{"yes"}, Directions: []string{dirRX, dirBidir}, Runs: 1, Time: 5 * time.Second, Flows: []int{1, 4}}
	m, _, err := o.matrix(sc, "sculpt_iperf.hid", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range m {
		got = append(got, s.String())
	}
	want := []string{"rx -P 1 rx_irq_throttle=adaptive tx_batch=yes", "rx -P 4 rx_irq_throttle=adaptive tx_batch=yes",
		"bidir -P 1 rx_irq_throttle=adaptive tx_batch=yes", "bidir -P 4 rx_irq_throttle=adaptive tx_batch=yes"}
	if !slices.Equal(got, want) {
		t.Errorf("matrix %q, want %q", got, want)
	}
	text, err := sc.patch(m[3], o)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(text); !strings.Contains(s, "-P 4") || !strings.Contains(s, "--bidir") {
		t.Errorf("the client's test of %s lacks -P 4 --bidir:\n%s", m[3], s)
	}
	o.Flows = []int{0}
	if _, _, err := o.matrix(sc, "sculpt_iperf.hid", io.Discard); err == nil || !strings.Contains(err.Error(), "--flows 0") {
		t.Errorf("--flows 0: %v", err)
	}
	// The tables name the flows in a column of their own and still fit 100 columns.
	pts := samplePoints()
	for i := range pts {
		pts[i].Flows, pts[i].RRLoadRatio, pts[i].RRLoadRatioRuns = 4, 1.25, []float64{1.25, 1.5, 1}
	}
	var out strings.Builder
	writeTables(&out, pts, &scenario{roles: map[string]string{}}, Options{Directions: []string{dirRX, dirTX}, Runs: 3, Time: 10 * time.Second, Latency: true, Flows: []int{4}})
	for _, line := range strings.Split(out.String(), "\n") {
		if len([]rune(line)) > 100 {
			t.Errorf("%d columns: %q", len([]rune(line)), line)
		}
	}
	for _, want := range []string{"tx_batch  -P", "yes   4     load 1 B  145  1210  12345  1.25 (1.25 1.50 1.00)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}

// --latency-guest separate adds guest B, a copy of the client's start with its own name,
// binary and MAC, that runs only the round trips, at the times of A's test; A runs only the
// bulk test, and the far end serves both.
func TestLatencyGuestSeparate(t *testing.T) {
	sc, err := loadScenario("../../deploy/sculpt_iperf.hid")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Latency: true, LatencyGuest: latencySeparate, Time: 5 * time.Second, Omit: 3 * time.Second}
	if err := o.checkLatency(sc); err != nil {
		t.Fatal(err)
	}
	if got := sc.rrTimers(); !slices.Equal(got, []string{"vm_rr"}) {
		t.Errorf("round trips timed by %v, want vm_rr", got)
	}
	text, err := sc.patch(setting{dir: dirRX, flows: 4}, o)
	if err != nil {
		t.Fatal(err)
	}
	root, err := config.Parse("patched", text)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]*config.Node{}
	for _, st := range root.Subs("start") {
		starts[st.Name()] = st
	}
	a, b, far := starts["vm"].Sub("config"), starts["vm_rr"], starts["remote_host"].Sub("config")
	if b == nil {
		t.Fatalf("no vm_rr in\n%s", text)
	}
	bc := b.Sub("config")
	if startBinary(b) != "vm" || b.Sub("route") == nil || b.Sub("affinity") == nil {
		t.Errorf("vm_rr: binary %q, route %v, affinity %v: want vm's", startBinary(b), b.Sub("route"), b.Sub("affinity"))
	}
	if bc.Has("iperf") || bc.String("rr", "") != rrCommand("198.18.0.2") || bc.String("rr_load_sec", "") != "5" || bc.String("rr_load_omit_sec", "") != "3" {
		t.Errorf("vm_rr's config %v: want rr with rr_load_sec 5, rr_load_omit_sec 3 and no iperf", bc.Attrs)
	}
	if a.Has("rr") || !strings.Contains(a.String("iperf", ""), "-P 4") {
		t.Errorf("vm's config %v: want the bulk test of 4 streams and no rr", a.Attrs)
	}
	if far.String("rr", "") != "-s" {
		t.Errorf("the far end's config %v: want an rr server", far.Attrs)
	}
	// Patched again (the next run), the scenario keeps one B.
	if again, _ := sc.patch(setting{dir: dirTX}, o); strings.Count(string(again), `name="vm_rr"`) != 1 {
		t.Errorf("B %d times after a second patch", strings.Count(string(again), `name="vm_rr"`))
	}

	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{LatencyGuest: latencySeparate}, "only with --latency"},
		{Options{Latency: true, LatencyGuest: "other"}, `--latency-guest "other"`},
	} {
		sc, _ := loadScenario("../../deploy/sculpt_iperf.hid")
		if err := tc.o.checkLatency(sc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
	static, _ := loadScenario("../../deploy/sculpt_iperf.hid")
	static.clients[0].cfg.Set("address", "10.0.1.9/24")
	if err := o.checkLatency(static); err == nil || !strings.Contains(err.Error(), "static address") {
		t.Errorf("a static guest A: %v", err)
	}
}
