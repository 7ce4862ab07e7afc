// Package faults kills each component of an iperf scenario with SIGKILL while a test runs, one
// fault per fresh run of the scenario, and measures what a crash costs: how long until the
// supervisor runs the component again, until the guests' traffic moves again, the longest
// pause after that, and whether the test's TCP flows went on. It is the harness of `nicstack
// bench faults` and of the fault suite's test.
package faults

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// Options are one invocation's settings.
type Options struct {
	bench.Components
	Faults  []string      // the starts to kill, in turn; empty: every start of the scenario
	Settle  time.Duration // traffic before the kill
	Observe time.Duration // how long the run is watched after the kill
	// Timeout is the guests' iperf --rcv-timeout and --snd-timeout: a test whose peer died
	// ends with an error after it instead of hanging.
	Timeout time.Duration
	JSON    string // also write the results to this file
}

// Result is one fault, as printed and written by --json; durations are from the kill.
type Result struct {
	Fault     string  `json:"fault"` // the start killed
	Binary    string  `json:"binary"`
	RestartMs float64 `json:"restart_ms"` // until its new process ran; -1: never
	// TrafficMs: until the guests' sessions moved data again (1 MiB after the restart); -1: never
	TrafficMs float64 `json:"traffic_ms"`
	StallMs   float64 `json:"stall_ms"`   // the longest pause in traffic after it moved again
	FlowsKept bool    `json:"flows_kept"` // the clients' tests from before the kill went on
	// Timeouts are the iperf tests that ended with a timeout (--rcv-timeout, --snd-timeout)
	// per guest, and Errors the iperf errors the guests logged, as iperf3 words them.
	Timeouts map[string]uint64 `json:"iperf_timeouts,omitempty"`
	Errors   []string          `json:"iperf_errors,omitempty"`
	Error    string            `json:"error,omitempty"` // why the fault could not be measured
}

// Run measures every fault of the scenario at path and prints the table to out.
func Run(ctx context.Context, out io.Writer, path string, o Options) ([]Result, error) {
	sc, err := load(path, o.Timeout, o.Settle+o.Observe+10*time.Second)
	if err != nil {
		return nil, err
	}
	faults := o.Faults
	if len(faults) == 0 {
		for _, st := range sc.root.Subs("start") {
			faults = append(faults, st.Name())
		}
	}
	for _, f := range faults {
		if sc.binaries[f] == "" {
			return nil, fmt.Errorf("%s: no <start name=%q>", path, f)
		}
	}
	bench.PrintLoad(out)
	var results []Result
	for _, f := range faults {
		r := sc.fault(ctx, f, o)
		if o.Verbose {
			fmt.Fprintf(out, "%+v\n", r)
		}
		results = append(results, r)
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
	}
	printTable(out, results)
	bench.PrintLoad(out)
	if o.JSON != "" {
		return results, bench.WriteJSON(o.JSON, results)
	}
	return results, nil
}

// scenario is the patched scenario and what the harness reads of it.
type scenario struct {
	root     *config.Node
	text     []byte
	binaries map[string]string // start name -> binary
	clients  []string          // starts whose guest runs an iperf client
	netns    map[string]bool   // of those, the netns guests: the real iperf3 runs in their namespace
}

func startBinary(st *config.Node) string {
	if b := st.Sub("binary"); b != nil {
		return b.Name()
	}
	return st.Name()
}

// load reads the scenario and patches its iperf commands: clients run for length and give up
// after timeout without data, servers too. A netns guest runs its iperf with the real iperf3.
func load(path string, timeout, length time.Duration) (*scenario, error) {
	root, err := config.ParseFile(path)
	if err != nil {
		return nil, err
	}
	sc := &scenario{root: root, binaries: map[string]string{}, netns: map[string]bool{}}
	ms := fmt.Sprint(timeout.Milliseconds())
	for _, st := range root.Subs("start") {
		sc.binaries[st.Name()] = startBinary(st)
		cfg := st.Sub("config")
		if cfg == nil {
			continue
		}
		for i := range cfg.Attrs {
			a := &cfg.Attrs[i]
			if a.Name != "iperf" && !(a.Name == "exec" && strings.HasPrefix(a.Value, "iperf3 ")) {
				continue
			}
			cmd, err := iperf.ParseCommand(strings.Fields(a.Value))
			if err != nil {
				return nil, config.Errorf(a.Pos, "%v", err)
			}
			args := []string{a.Value, "--snd-timeout", ms}
			if cmd.Server || cmd.Reverse || cmd.Bidir {
				args = append(args, "--rcv-timeout", ms) // iperf3 refuses it on a client that only sends
			}
			if !cmd.Server {
				sc.clients = append(sc.clients, st.Name())
				args = append(args, "-t", fmt.Sprint(int(length.Seconds())))
			}
			a.Value = strings.Join(args, " ")
			if a.Name == "iperf" && cfg.String("guest", "embedded") == "netns" {
				sc.netns[st.Name()] = !cmd.Server
			}
		}
	}
	if len(sc.clients) == 0 {
		return nil, fmt.Errorf("%s: no guest runs an iperf client (<config iperf=\"-c HOST ...\"/>)", path)
	}
	sc.text = root.XML()
	return sc, nil
}

// sampleEvery is how often the harness reads the run's status while it watches a fault.
const sampleEvery = 20 * time.Millisecond

// sample is a status and when it was asked for.
type sample struct {
	at     time.Time
	status supervisor.Status
}

// watch asks for s's status every sampleEvery for d and returns the answers in the order
// asked. Each is asked in its own goroutine: a status waits for every component's answer (up
// to a second from one just started), and a slow one must not hold back the next samples.
// A status counts as of when it was asked for: its counters are read right after.
func watch(ctx context.Context, s *supervisor.Supervisor, d time.Duration) []sample {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var samples []sample
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; <-tick.C {
		wg.Go(func() {
			at := time.Now()
			if st, ok := s.Status(); ok {
				mu.Lock()
				samples = append(samples, sample{at, st})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(samples, func(a, b sample) int { return a.at.Compare(b.at) })
	return samples
}

// resumed is how much the guests' sessions move after the restart before traffic counts as
// flowing again: more than the frames a restart itself brings (ARP, DHCP, retransmissions).
const resumed = 1 << 20

// fault runs the scenario, kills name once traffic flows and watches what follows.
func (sc *scenario) fault(ctx context.Context, name string, o Options) Result {
	r := Result{Fault: name, Binary: sc.binaries[name], RestartMs: -1, TrafficMs: -1}
	logs := &iperfErrors{}
	c := o.Components
	c.Logs = logs
	run, err := c.StartScenario(ctx, "faults", sc.text)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer run.Stop()
	tr := newTraffic(sc.clients)
	status := func() (supervisor.Status, bool) {
		st, ok := run.S.Status()
		if ok {
			tr.add(st)
		}
		return st, ok
	}
	if !bench.WaitFor(30*time.Second, func() bool { status(); return tr.total > resumed }) {
		r.Error, r.Errors = "no traffic before the kill", logs.list()
		return r
	}
	time.Sleep(o.Settle)
	before, ok := status()
	if !ok {
		r.Error = "the scenario ended"
		return r
	}
	victim := component(before, name)
	if victim.Pid == 0 {
		r.Error = name + " has no process"
		return r
	}
	if err := syscall.Kill(victim.Pid, syscall.SIGKILL); err != nil {
		r.Error = err.Error()
		return r
	}
	killed := time.Now()
	var restartedAt time.Duration = -1
	var fromRestart uint64
	var resumedAt, lastMove, stall time.Duration = -1, 0, 0
	var last supervisor.Status
	for _, sm := range watch(ctx, run.S, o.Observe) {
		tr.add(sm.status)
		last = sm.status
		now := sm.at.Sub(killed)
		if c := component(sm.status, name); restartedAt < 0 && c.State == "running" && c.Pid != 0 && c.Pid != victim.Pid {
			restartedAt = now
		}
		if restartedAt < 0 {
			continue
		}
		fromRestart += tr.delta
		switch {
		case resumedAt < 0 && fromRestart >= resumed:
			resumedAt, lastMove = now, now
		case resumedAt >= 0 && tr.delta > 0:
			lastMove = now
		}
		if resumedAt >= 0 {
			stall = max(stall, now-lastMove)
		}
	}
	r.RestartMs, r.TrafficMs, r.StallMs = ms(restartedAt), ms(resumedAt), ms(stall)
	// The logs first, then a status: a guest counts a test's end before it logs it, so every
	// error read here is in the counters of the status after it.
	r.Errors = logs.list()
	if st, ok := run.S.Status(); ok && last.Components != nil {
		last = st
	}
	r.FlowsKept = last.Components != nil
	r.Timeouts = map[string]uint64{}
	for _, cl := range sc.clients {
		b, a := component(before, cl), component(last, cl)
		if sc.netns[cl] {
			// The real iperf3 in the namespace (which a restarted guest takes over) printed no error.
			r.FlowsKept = r.FlowsKept && !slices.ContainsFunc(r.Errors, func(e string) bool { return strings.HasPrefix(e, cl+"/") })
			continue
		}
		// The same process, and neither its test nor any other ended: the flows went on.
		r.FlowsKept = r.FlowsKept && a.Pid == b.Pid && a.Counters["iperf_tests"] == b.Counters["iperf_tests"]
	}
	for _, cs := range last.Components {
		if n := cs.Counters["iperf_timeouts"]; n > 0 {
			r.Timeouts[cs.Name] = n
		}
	}
	return r
}

func ms(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return float64(d.Microseconds()) / 1000
}

func component(st supervisor.Status, name string) supervisor.ComponentStatus {
	for _, c := range st.Components {
		if c.Name == name {
			return c
		}
	}
	return supervisor.ComponentStatus{}
}

// traffic follows the bytes through the clients' sessions, each session on its own: a session
// a restart opened counts from 0, and one a status missed (its component busy or gone) keeps
// its last count.
type traffic struct {
	clients map[string]bool
	seen    map[uint64]uint64 // session id -> bytes both ways
	total   uint64
	delta   uint64 // moved since the previous status
}

func newTraffic(clients []string) *traffic {
	t := &traffic{clients: map[string]bool{}, seen: map[uint64]uint64{}}
	for _, c := range clients {
		t.clients[c] = true
	}
	return t
}

func (t *traffic) add(st supervisor.Status) {
	t.delta = 0
	for _, c := range st.Components {
		if !t.clients[c.Name] {
			continue
		}
		for _, s := range c.Sessions {
			b := s.Sent.Bytes + s.Received.Bytes
			if prev := t.seen[s.ID]; b > prev {
				t.delta += b - prev
				t.seen[s.ID] = b
			}
		}
	}
	t.total += t.delta
}

// iperfErrors collects, from the run's log, the errors the guests' iperf tests ended with.
type iperfErrors struct {
	mu   sync.Mutex
	errs []string
}

// iperfResult finds a log line of a failed test: an embedded guest's `[vm] ... msg="iperf
// result" ... error="..."`, or a real iperf3's in a guest's namespace, `[vm/ns] iperf3: error - ...`.
var iperfResult = regexp.MustCompile(`(?m)^\[([^\]]+)\](?:.*msg="iperf result".* error="([^"]+)"| iperf3: error - (.*))`)

func (e *iperfErrors) Write(p []byte) (int, error) {
	for _, m := range iperfResult.FindAllSubmatch(p, -1) {
		e.mu.Lock()
		e.errs = append(e.errs, string(m[1])+": "+string(m[2])+string(m[3]))
		e.mu.Unlock()
	}
	return len(p), nil
}

func (e *iperfErrors) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.errs)
}

// printTable writes the table of results.
func printTable(out io.Writer, results []Result) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "kill -9\trestart\ttraffic again\tlongest stall after\tflows kept\tiperf ended with")
	for _, r := range results {
		if r.Error != "" {
			fmt.Fprintf(w, "%s\t%s\n", r.Fault, r.Error)
			continue
		}
		ended := strings.Join(r.Errors, "; ")
		if ended == "" {
			ended = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Fault, msText(r.RestartMs), msText(r.TrafficMs), msText(r.StallMs),
			map[bool]string{true: "yes", false: "no"}[r.FlowsKept], ended)
	}
	w.Flush()
}

func msText(v float64) string {
	if v < 0 {
		return "never"
	}
	return fmt.Sprintf("%.0f ms", v)
}
