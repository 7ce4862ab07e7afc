package supervisor

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// run is a supervisor running a scenario written to a temporary file, with the test
// components as binaries, stopped when the test ends.
type run struct {
	t    *testing.T
	s    *Supervisor
	path string
	logs *testutil.SyncBuffer
}

func testBinDir(t *testing.T) string {
	testutil.Binary(t, "github.com/nicstack/nicstack/components/test_client")
	return filepath.Dir(testutil.Binary(t, "github.com/nicstack/nicstack/components/test_echo"))
}

func startRun(t *testing.T, scenario string, tweak func(*Options)) *run {
	t.Helper()
	r := newRun(t, scenario, tweak)
	r.start()
	return r
}

// newRun makes the supervisor of scenario, not running yet (start runs it).
func newRun(t *testing.T, scenario string, tweak func(*Options)) *run {
	t.Helper()
	r := &run{t: t, path: filepath.Join(t.TempDir(), "scenario.xml"), logs: &testutil.SyncBuffer{}}
	if err := os.WriteFile(r.path, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{
		BinDirs: []string{testBinDir(t)}, Components: components.Table, Out: NewOutput(r.logs, false), Verbose: true,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		RunDir: filepath.Join(testutil.ReachableTempDir(t), "run"), WatchInterval: 20 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&opts)
	}
	s, err := New(r.path, opts)
	if err != nil {
		t.Fatal(err)
	}
	r.s = s
	return r
}

// start runs the supervisor until the test ends.
func (r *run) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.s.Run(ctx) }()
	r.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			r.t.Error(err)
		}
		if r.t.Failed() || os.Getenv("NICSTACK_TEST_LOGS") != "" {
			r.t.Logf("supervisor output:\n%s", r.logs.String())
		}
	})
}

func (r *run) status() Status {
	st, ok := r.s.Status()
	if !ok {
		r.t.Fatal("supervisor ended")
	}
	return st
}

func (r *run) component(name string) ComponentStatus {
	for _, c := range r.status().Components {
		if c.Name == name {
			return c
		}
	}
	r.t.Fatalf("no component %q", name)
	return ComponentStatus{}
}

// waitFor polls cond until it holds or the time is up.
func (r *run) waitFor(what string, timeout time.Duration, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s; status: %+v", what, r.status())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rewrite changes the scenario file; the supervisor notices within its watch interval.
func (r *run) rewrite(from, to string) {
	r.t.Helper()
	b, err := os.ReadFile(r.path)
	if err != nil {
		r.t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(from)) {
		r.t.Fatalf("scenario lacks %q", from)
	}
	if err := os.WriteFile(r.path, bytes.Replace(b, []byte(from), []byte(to), 1), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// testStream is test_client's default stream geometry (queue_size 64, bulk_size 64 blocks).
var testStream = packetstream.Config{QueueSize: 64, BulkSize: 64 * packetstream.BlockSize}

// echoScenario restarts what exits (restart="yes", ours): its tests kill components.
const echoScenario = `<config>
	<default restart="yes"/>
	<affinity-space width="2" height="1"/>
	<start name="echo" ram="1M" version="1">
		<binary name="test_echo"/>
		<affinity xpos="0" ypos="0"/>
		<provides> <service name="Nic"/> </provides>
		<config tag="1"/>
	</start>
	<start name="client" ram="1M">
		<binary name="test_client"/>
		<affinity xpos="1" ypos="0"/>
		<route> <service name="Nic"> <child name="echo" label="uplink"/> </service> </route>
		<config label="vm" window="8" size="128" interval_us="200"/>
	</start>
</config>`

func TestFramesThroughRoutedSession(t *testing.T) {
	r := startRun(t, echoScenario, nil)
	r.waitFor("1000 frames echoed", 20*time.Second, func() bool { return r.component("client").Counters["received"] >= 1000 })
	echo, client := r.component("echo"), r.component("client")
	if client.Counters["mismatches"] != 0 {
		t.Errorf("%d mismatched replies", client.Counters["mismatches"])
	}
	if len(echo.Sessions) != 1 || echo.Sessions[0].Label != "uplink" || echo.Sessions[0].Role != "server" {
		t.Errorf("echo sessions: %+v", echo.Sessions)
	}
	if len(client.Requests) != 1 || client.Requests[0].State != "open" || client.Requests[0].Server != "echo" {
		t.Errorf("client requests: %+v", client.Requests)
	}
	if got, want := client.RAMUsed, uint64(2*testStream.RegionSize()); got != want {
		t.Errorf("client pays %d bytes of session ram, want %d", got, want)
	}
	if echo.RAMUsed != 0 {
		t.Errorf("the server pays %d bytes; the client should", echo.RAMUsed)
	}
	// Each side reports the stream it sends on: what waits for the peer, no more than the
	// queue holds, aged only while something waits.
	for _, c := range []struct {
		st   ComponentStatus
		hops string
	}{{client, "uplink tx, uplink tx acks"}, {echo, "uplink rx, uplink rx acks"}} {
		var hops []string
		for _, q := range c.st.Queues {
			hops = append(hops, q.Hop)
			if q.Frames > uint64(testStream.QueueSize) || q.Sojourn < 0 || (q.Frames == 0 && (q.Bytes != 0 || q.Sojourn != 0)) {
				t.Errorf("%s: queue %+v", c.st.Name, q)
			}
		}
		if got := strings.Join(hops, ", "); got != c.hops {
			t.Errorf("%s reports queues %s, want %s", c.st.Name, got, c.hops)
		}
	}
}

// cpusAllowed reads the CPU list of every thread of pid.
func cpusAllowed(t *testing.T, pid int) map[string]bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("no threads of %d: %v", pid, err)
	}
	sets := map[string]bool{}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				sets[strings.TrimSpace(v)] = true
			}
		}
	}
	return sets
}

func TestAffinityPinsEveryThread(t *testing.T) {
	topo, err := ReadTopology()
	if err != nil {
		t.Fatal(err)
	}
	for _, space := range []Space{{1, 1}, {2, 1}, {4, 2}, {3, 3}} {
		t.Run(space.String(), func(t *testing.T) {
			var b strings.Builder
			fmt.Fprintf(&b, `<config><affinity-space width="%d" height="%d"/>`, space.Width, space.Height)
			var starts []*Start
			for x := 0; x < space.Width; x += max(1, space.Width-1) {
				fmt.Fprintf(&b, `<start name="e%d"><binary name="test_echo"/><affinity xpos="%d" ypos="%d"/></start>`, x, x, space.Height-1)
			}
			b.WriteString(`<start name="whole"><binary name="test_echo"/></start></config>`)
			r := startRun(t, b.String(), nil)
			sc := mustScenario(t, b.String())
			starts = sc.Starts
			r.waitFor("all running", 10*time.Second, func() bool {
				for _, c := range r.status().Components {
					if c.State != "running" {
						return false
					}
				}
				return true
			})
			for _, st := range starts {
				want := Place(st, space, topo).CPUs
				c := r.component(st.Name)
				if c.CPUs != want.String() {
					t.Errorf("%s: status shows cpus %s, mapping says %s", st.Name, c.CPUs, want)
				}
				sets := cpusAllowed(t, c.Pid)
				if len(sets) != 1 || !sets[want.String()] {
					t.Errorf("%s (pid %d): threads run on %v, want all on %s", st.Name, c.Pid, keys(sets), want)
				}
			}
		})
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

const routingRunScenario = `<config>
	<default-route> <any-service> <any-child/> </any-service> </default-route>
	<start name="a"> <binary name="test_echo"/> <provides> <service name="Nic"/> </provides> </start>
	<start name="b"> <binary name="test_echo"/> <provides> <service name="Nic"/> </provides> </start>
	<start name="u"> <binary name="test_echo"/> <provides> <service name="Uplink"/> </provides> <config service="Uplink"/> </start>
	<start name="first"> <binary name="test_client"/>
		<route>
			<service name="Nic" label_prefix="vm"> <child name="b" label="rewritten"/> </service>
			<service name="Nic"> <child name="a"/> </service>
		</route>
		<config label="vm7"/>
	</start>
	<start name="fallthrough"> <binary name="test_client"/>
		<route>
			<service name="Nic" label_prefix="vm"> <child name="b"/> </service>
			<service name="Nic"> <child name="a"/> </service>
		</route>
		<config label="other"/>
	</start>
	<start name="defaulted"> <binary name="test_client"/> <config service="Uplink"/> </start>
	<start name="ambiguous"> <binary name="test_client"/> <config/> </start>
	<start name="own-route"> <binary name="test_client"/>
		<route> <service name="Nic"> <child name="a"/> </service> </route>
		<config service="Uplink"/>
	</start>
	<start name="poor" ram="100K"> <binary name="test_client"/> <route> <any-service> <child name="a"/> </any-service> </route> </start>
</config>`

func TestRouting(t *testing.T) {
	r := startRun(t, routingRunScenario, nil)
	request := func(name string) RequestStatus {
		reqs := r.component(name).Requests
		if len(reqs) != 1 {
			return RequestStatus{}
		}
		return reqs[0]
	}
	r.waitFor("every request decided", 20*time.Second, func() bool {
		for _, n := range []string{"first", "fallthrough", "defaulted", "ambiguous", "own-route", "poor"} {
			if s := request(n).State; s != "open" && s != "denied" {
				return false
			}
		}
		return true
	})
	region := testStream.RegionSize() // test_client's default session geometry
	for _, tc := range []struct{ client, state, server, reason string }{
		{"first", "open", "b", ""},
		{"fallthrough", "open", "a", ""},
		{"defaulted", "open", "u", ""},
		{"ambiguous", "denied", "", "scenario.xml:2:33: ambiguous, provided by a, b"},
		{"own-route", "denied", "", "no rule matches"}, // its own route has no Uplink; default-route is not used
		{"poor", "denied", "", fmt.Sprintf(`needs %d bytes of session buffers (tx %d + rx %d), but ram=102400 of "poor" has 102400 left; raise its ram`, 2*region, region, region)},
	} {
		got := request(tc.client)
		if got.State != tc.state || got.Server != tc.server || !strings.Contains(got.Reason, tc.reason) {
			t.Errorf("%s: got %+v, want state %s server %q reason containing %q", tc.client, got, tc.state, tc.server, tc.reason)
		}
	}
	labels := map[string]bool{}
	for _, n := range []string{"a", "b", "u"} {
		for _, s := range r.component(n).Sessions {
			labels[n+": "+s.Label] = true
		}
	}
	for _, want := range []string{"b: rewritten", "a: fallthrough -> other", "u: defaulted -> "} {
		if !labels[want] {
			t.Errorf("no session %q; servers see %v", want, keys(labels))
		}
	}
	if logs := r.logs.String(); !strings.Contains(logs, `tried: default-route: <any-service> -> <any-child/> at `) {
		t.Errorf("denial logs lack the rule trace:\n%s", logs)
	}
}

// pidAlive reports whether pid is a live (not zombie) process.
func pidAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z'
}

// openFiles counts this process's file descriptors and how many of them are memfds.
func openFiles(t *testing.T) (all, memfds int) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "/memfd:") {
			memfds++
		}
	}
	return len(ents), memfds
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// TestKillServerMidStream kills the echo server with SIGKILL again and again while the client
// sends: each time the client sees link down, then link up, and traffic resumes. It logs the
// medians of the session set-up time (the supervisor starts opening -> first reply at the
// client) and of the time from the kill to the first reply after it.
func TestKillServerMidStream(t *testing.T) {
	kills := 100
	if testing.Short() {
		kills = 10
	}
	r := startRun(t, echoScenario, nil)
	client := func() ComponentStatus { return r.component("client") }
	r.waitFor("traffic", 20*time.Second, func() bool { return client().Counters["received"] >= 100 })
	baseAll, baseMem := openFiles(t)
	var setup, recovery []time.Duration
	for i := 0; i < kills; i++ {
		before := client()
		echoPid := r.component("echo").Pid
		t0 := time.Now()
		if err := syscall.Kill(echoPid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var after ComponentStatus
		r.waitFor(fmt.Sprintf("traffic after kill %d", i+1), 20*time.Second, func() bool {
			after = client()
			return after.Counters["link_ups"] > before.Counters["link_ups"] &&
				int64(after.Counters["first_reply_unix_ns"]) > t0.UnixNano() &&
				after.Counters["received"] >= before.Counters["received"]+10
		})
		if after.Counters["link_downs"] <= before.Counters["link_downs"] {
			t.Fatalf("kill %d: the client saw no link down", i+1)
		}
		first := time.Unix(0, int64(after.Counters["first_reply_unix_ns"]))
		if testing.Verbose() && i < 5 {
			t.Logf("kill %d: recovered after %v, loop took %v", i+1, first.Sub(t0), time.Since(t0))
		}
		recovery = append(recovery, first.Sub(t0))
		setup = append(setup, first.Sub(after.Requests[0].OpenedAt))
	}
	c := client()
	if c.Counters["mismatches"] != 0 {
		t.Errorf("%d mismatched replies", c.Counters["mismatches"])
	}
	if e := r.component("echo"); e.Restarts != kills {
		t.Errorf("echo restarted %d times, want %d", e.Restarts, kills)
	}
	all, mem := openFiles(t)
	t.Logf("after %d kills: %d fds (%d before), %d memfds (%d before)", kills, all, baseAll, mem, baseMem)
	if mem > baseMem || all > baseAll+2 {
		t.Errorf("the supervisor leaks: %d fds and %d memfds, started with %d and %d", all, mem, baseAll, baseMem)
	}
	t.Logf("median session set-up (open to first reply): %v over %d sessions", median(setup), len(setup))
	t.Logf("median kill -9 to traffic flowing again: %v over %d kills (restart back-off %v)", median(recovery), len(recovery), 5*time.Millisecond)
}

func TestVersionChangeRestarts(t *testing.T) {
	r := startRun(t, echoScenario, nil)
	r.waitFor("traffic", 20*time.Second, func() bool { return r.component("client").Counters["received"] >= 10 })
	old := r.component("echo").Pid
	r.rewrite(`version="1"`, `version="2"`)
	r.waitFor("a new echo with traffic", 20*time.Second, func() bool {
		e := r.component("echo")
		return e.Pid != old && e.State == "running" && r.component("client").Counters["link_ups"] >= 2
	})
	r.waitFor("the old echo to end", 10*time.Second, func() bool { return !pidAlive(old) }) // it ends in the background
	if !strings.Contains(r.logs.String(), `echo: version \"1\" -> \"2\"; restarting it`) {
		t.Error("no log line for the version change")
	}
}

func TestLiveConfigUpdate(t *testing.T) {
	r := startRun(t, echoScenario, nil)
	r.waitFor("echo configured", 20*time.Second, func() bool { return r.component("echo").Counters["tag"] == 1 })
	pid := r.component("echo").Pid
	r.rewrite(`tag="1"`, `tag="42"`)
	r.waitFor("the new tag", 10*time.Second, func() bool { return r.component("echo").Counters["tag"] == 42 })
	e := r.component("echo")
	if e.Pid != pid || e.Restarts != 0 || e.Counters["configs"] != 2 {
		t.Errorf("config update restarted the echo or was not delivered once: %+v", e)
	}
	// A config the component rejects keeps its old one; the error names the scenario's line.
	r.rewrite(`tag="42"`, `tag="x"`)
	r.waitFor("the rejection", 10*time.Second, func() bool {
		return strings.Contains(r.logs.String(), `echo rejected its new config (keeps the old one): `)
	})
	if logs := r.logs.String(); !strings.Contains(logs, `scenario.xml:8:11: attribute \"tag\" of <config>: \"x\" is not a number`) {
		t.Errorf("the rejection does not name the scenario's line:\n%s", logs)
	}
	// A broken scenario keeps the running one.
	r.rewrite(`tag="x"`, `tag="42"><oops`)
	r.waitFor("the broken file noticed", 10*time.Second, func() bool {
		return strings.Contains(r.logs.String(), "scenario changed but is broken; keeping the running one")
	})
	if e := r.component("echo"); e.Pid != pid {
		t.Error("a broken scenario restarted the echo")
	}
}

func TestStopRemovesEverything(t *testing.T) {
	runDir := filepath.Join(testutil.ReachableTempDir(t), "run")
	path := filepath.Join(t.TempDir(), "s.xml")
	os.WriteFile(path, []byte(echoScenario), 0o644)
	s, err := New(path, Options{BinDirs: []string{testBinDir(t)}, Components: components.Table, Out: NewOutput(&testutil.SyncBuffer{}, false), RunDir: runDir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var pids []int
	deadline := time.Now().Add(20 * time.Second)
	for len(pids) < 2 && time.Now().Before(deadline) {
		pids = pids[:0]
		if st, ok := s.Status(); ok {
			for _, c := range st.Components {
				if len(c.Sessions) > 0 {
					pids = append(pids, c.Pid)
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(pids) < 2 {
		t.Fatal("components did not come up")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if pidAlive(pid) {
			t.Errorf("component pid %d survived the stop", pid)
		}
	}
	if _, err := os.Stat(runDir); !os.IsNotExist(err) {
		t.Errorf("run folder %s left behind", runDir)
	}
}

// TestSkippedHeartbeatsRestart: with <heartbeat restart_after_skipped="2"/> a hung component
// is restarted once it skipped three heartbeats, as Genode's init does.
func TestSkippedHeartbeatsRestart(t *testing.T) {
	scenario := strings.Replace(echoScenario, `<affinity-space width="2" height="1"/>`, `<affinity-space width="2" height="1"/><heartbeat rate_ms="50"/>`, 1)
	scenario = strings.Replace(scenario, `<config tag="1"/>`, `<config tag="1"/><heartbeat restart_after_skipped="2"/>`, 1)
	r := startRun(t, scenario, nil)
	r.waitFor("traffic", 20*time.Second, func() bool { return r.component("client").Counters["received"] >= 10 })
	pid := r.component("echo").Pid
	syscall.Kill(pid, syscall.SIGSTOP) // hung: no heartbeats answered
	r.waitFor("a new echo with traffic", 20*time.Second, func() bool {
		e := r.component("echo")
		return e.Pid != pid && e.State == "running" && r.component("client").Counters["link_ups"] >= 2
	})
	if !strings.Contains(r.logs.String(), "echo skipped 3 heartbeats (restart_after_skipped=2); restarting it") {
		t.Error("no log line for the skipped heartbeats")
	}
}

// TestSkippedHeartbeatsReported: a plain <heartbeat/> only counts what a hung component skips
// (status, state report) and does not restart it, as Genode's init; once it answers again
// the count is back to 0.
func TestSkippedHeartbeatsReported(t *testing.T) {
	scenario := strings.Replace(echoScenario, `<affinity-space width="2" height="1"/>`, `<affinity-space width="2" height="1"/><heartbeat rate_ms="20"/>`, 1)
	scenario = strings.Replace(scenario, `<config tag="1"/>`, `<config tag="1"/><heartbeat/>`, 1)
	r := startRun(t, scenario, nil)
	r.waitFor("echo running", 20*time.Second, func() bool { return r.component("echo").State == "running" })
	pid := r.component("echo").Pid
	syscall.Kill(pid, syscall.SIGSTOP)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	r.waitFor("10 skipped heartbeats", 10*time.Second, func() bool { return r.component("echo").SkippedHeartbeats >= 10 })
	st := r.status()
	report := string(Report(st, nil).XML())
	if !strings.Contains(report, `skipped_heartbeats="`) {
		t.Errorf("the state report lacks skipped_heartbeats:\n%s", report)
	}
	syscall.Kill(pid, syscall.SIGCONT)
	r.waitFor("the count back at 0", 10*time.Second, func() bool { return r.component("echo").SkippedHeartbeats == 0 })
	if e := r.component("echo"); e.Pid != pid || e.Restarts != 0 {
		t.Errorf("the echo was restarted: %+v", e)
	}
}

func TestBrokenBinaryIsRetried(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "broken"), []byte("#!/bin/sh\necho broken on purpose >&2\nexit 3\n"), 0o755)
	r := startRun(t, `<config><start name="broken" restart="yes"/></config>`, func(o *Options) { o.BinDirs = append(o.BinDirs, dir) })
	r.waitFor("retries", 20*time.Second, func() bool { return r.component("broken").Restarts >= 3 })
	logs := r.logs.String()
	for _, want := range []string{"[broken] broken on purpose", "broken: trying again in"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q", want)
		}
	}
}

func TestServerReportsLinkState(t *testing.T) {
	r := startRun(t, echoScenario, nil)
	peerLink := func() uint64 { return r.component("client").Counters["peer_link"] }
	r.waitFor("link up", 20*time.Second, func() bool { return peerLink() == 1 })
	r.rewrite(`<config tag="1"/>`, `<config tag="1" link="no"/>`)
	r.waitFor("the server's link down at the client", 10*time.Second, func() bool { return peerLink() == 0 })
	if c := r.component("client"); len(c.Sessions) != 1 || c.Sessions[0].LinkUp {
		t.Errorf("client session: %+v", c.Sessions)
	}
	r.rewrite(`link="no"`, `link="yes"`)
	r.waitFor("link up again", 10*time.Second, func() bool { return peerLink() == 1 })
}

const deviceScenario = `<config>
	<start name="platform" ram="1M" restart="yes">
		<binary name="test_echo"/>
		<provides> <service name="Platform"/> </provides>
		<config service="Platform"/>
	</start>
	<start name="driver" ram="1M">
		<binary name="test_client"/>
		<route> <service name="Platform"> <child name="platform"/> </service> </route>
		<config service="Platform" device="yes"/>
	</start>
	<start name="poor" ram="1K">
		<binary name="test_client"/>
		<route> <service name="Platform"> <child name="platform"/> </service> </route>
		<config service="Platform" device="yes"/>
	</start>
</config>`

// TestDeviceSession: the page the driver writes is the one the platform reads and answers
// in, both eventfds signal, the driver pays for the page, a server restart hands fresh files,
// and a client without the ram is told so.
func TestDeviceSession(t *testing.T) {
	r := startRun(t, deviceScenario, nil)
	driver := func() ComponentStatus { return r.component("driver") }
	r.waitFor("100 device exchanges", 20*time.Second, func() bool { return driver().Counters["device_rounds"] >= 100 })
	d := driver()
	if d.Counters["mismatches"] != 0 {
		t.Errorf("%d answers did not match", d.Counters["mismatches"])
	}
	if d.RAMUsed != 4096 {
		t.Errorf("driver pays %d bytes, want the page's 4096", d.RAMUsed)
	}
	if len(d.Sessions) != 1 || d.Sessions[0].Service != "Platform" || d.Sessions[0].Role != "client" {
		t.Errorf("driver sessions: %+v", d.Sessions)
	}
	syscall.Kill(r.component("platform").Pid, syscall.SIGKILL)
	r.waitFor("100 more exchanges with the restarted platform", 20*time.Second, func() bool {
		d := driver()
		return d.Counters["device_rounds"] >= 200 && d.Counters["link_downs"] == 1 && d.Counters["link_ups"] == 2
	})
	r.waitFor("the denial at the poor client", 20*time.Second, func() bool { return r.component("poor").Counters["denied"] == 1 })
	if p := r.component("poor"); len(p.Requests) != 1 || !strings.Contains(p.Requests[0].Reason, `needs 4096 bytes of device memory (1 regions), but ram=1024`) {
		t.Errorf("poor requests: %+v", p.Requests)
	}
	if d := driver(); d.Counters["mismatches"] != 0 || d.Counters["denied"] != 0 {
		t.Errorf("driver counters after the restart: %v", d.Counters)
	}
}

func TestMetrics(t *testing.T) {
	r := startRun(t, echoScenario, nil)
	r.waitFor("traffic", 20*time.Second, func() bool { return r.component("client").Counters["received"] >= 10 })
	rec := httptest.NewRecorder()
	r.s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		"# TYPE nicstack_session_frames_total counter",
		`nicstack_component_up{component="echo",cpus="`,
		"# TYPE nicstack_received_total counter",
		`nicstack_received_total{component="client"}`,
		"# TYPE nicstack_component_cpu_seconds_total counter",
		`nicstack_session_frames_total{component="client",direction="sent",label="uplink",role="client",service="Nic",session="1"}`,
		"# TYPE nicstack_queue_frames gauge",
		`nicstack_queue_frames{component="client",hop="uplink tx"}`,
		`nicstack_queue_bytes{component="client",hop="uplink tx acks"}`,
		`nicstack_queue_sojourn_seconds{component="echo",hop="uplink rx"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	// Prometheus' own linter: names, units, _total on counters, help on every family.
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil || len(problems) != 0 {
		t.Errorf("promlint: %v %+v", err, problems)
	}
}
