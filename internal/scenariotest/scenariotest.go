// Package scenariotest runs a scenario under a real supervisor for the length of a test, as the
// component and root tests do: the scenario file in a temporary folder, the components' logs
// kept and shown when the test fails (or always with NICSTACK_TEST_LOGS set).
package scenariotest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/hostservice"
	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// Deploy returns the scenario deploy/name of this repository with the replacements (old, new
// pairs) made; an old the scenario does not contain fails the test.
func Deploy(t testing.TB, name string, replace ...string) string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", "deploy", name))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(text, replace[i]) {
			t.Fatalf("%s has no %q", name, replace[i])
		}
		text = strings.ReplaceAll(text, replace[i], replace[i+1])
	}
	return text
}

// Run is a running scenario.
type Run struct {
	S    *supervisor.Supervisor
	Path string // the scenario file
	Logs *testutil.SyncBuffer

	t      testing.TB
	text   string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// Start writes text as the scenario file name (its extension says the syntax) and runs a
// supervisor on it until Stop or the end of the test. opt needs BinDirs; Out and RunDir are
// the run's own, and ParentServices are the host's (Tap, Packet) unless opt names some. A
// test whose components write files (a report) passes the component table: the supervisor
// writes only what a component's Spec says its config names.
func Start(t testing.TB, name, text string, opt supervisor.Options) *Run {
	t.Helper()
	r := &Run{Path: filepath.Join(t.TempDir(), name), Logs: &testutil.SyncBuffer{}, t: t}
	r.write(text)
	opt.Out = supervisor.NewOutput(r.Logs, false)
	opt.RunDir = filepath.Join(testutil.ReachableTempDir(t), "run")
	if opt.ParentServices == nil {
		opt.ParentServices = hostservice.Services()
	}
	s, err := supervisor.New(r.Path, opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.S, r.cancel, r.done = s, cancel, make(chan error, 1)
	go func() { r.done <- s.Run(ctx) }()
	t.Cleanup(r.Stop)
	return r
}

// Stop stops the supervisor and waits until everything it started is gone; later calls do
// nothing.
func (r *Run) Stop() {
	r.once.Do(func() {
		r.cancel()
		if err := <-r.done; err != nil {
			r.t.Error(err)
		}
		if r.t.Failed() || os.Getenv("NICSTACK_TEST_LOGS") != "" {
			r.t.Logf("supervisor output:\n%s", r.Logs.String())
		}
	})
}

// Edit replaces every old with new in the scenario; the supervisor's watcher applies it.
func (r *Run) Edit(old, new string) {
	r.t.Helper()
	if !strings.Contains(r.text, old) {
		r.t.Fatalf("scenario has no %q", old)
	}
	// The watcher compares modification times, which come from a coarse clock (some ms).
	time.Sleep(20 * time.Millisecond)
	r.write(strings.ReplaceAll(r.text, old, new))
}

// write replaces the file in one rename, so that the watcher never reads half of it.
func (r *Run) write(text string) {
	r.t.Helper()
	tmp := r.Path + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(tmp, r.Path); err != nil {
		r.t.Fatal(err)
	}
	r.text = text
}

// Component is the status of the component called name; the test fails when the run ended or
// has no such component.
func (r *Run) Component(name string) supervisor.ComponentStatus {
	r.t.Helper()
	st, ok := r.S.Status()
	if !ok {
		r.t.Fatal("the scenario ended")
	}
	for _, c := range st.Components {
		if c.Name == name {
			return c
		}
	}
	r.t.Fatalf("no component %q", name)
	return supervisor.ComponentStatus{}
}

// Kill kills component name's process with SIGKILL, as a crash ends it, and returns its pid.
func (r *Run) Kill(name string) int {
	r.t.Helper()
	pid := r.Component(name).Pid
	if pid == 0 {
		r.t.Fatalf("%s has no process", name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		r.t.Fatalf("kill -9 %s (%d): %v", name, pid, err)
	}
	return pid
}

// WaitRestarted waits until component name runs again in a process other than old's.
func (r *Run) WaitRestarted(name string, old int) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c := r.Component(name); c.State == "running" && c.Pid != 0 && c.Pid != old {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s did not run again after its process %d ended", name, old)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// IperfReport waits up to a minute for the iperf report (JSON) a component writes to path
// (an embedded guest's report attribute; the supervisor writes it whole, by a rename) and
// returns it.
func (r *Run) IperfReport(path string) *iperf.Report {
	r.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var rep iperf.Report
		b, err := os.ReadFile(path)
		if err == nil {
			if err = json.Unmarshal(b, &rep); err == nil {
				return &rep
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("iperf report %s: %v", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// IperfStall is how long an iperf test stood still, from its report's intervals (-i): in the
// longest run of intervals below half the median rate, the time each interval fell short of
// the median (an interval at a quarter of it counts three quarters of its length). A clean
// outage so counts its length, though it begins and ends inside an interval.
func IperfStall(rep *iperf.Report) time.Duration {
	var rates []float64
	for _, iv := range rep.Intervals {
		if iv.Sum != nil && !iv.Sum.Omitted {
			rates = append(rates, iv.Sum.BitsPerSecond)
		}
	}
	if len(rates) == 0 {
		return 0
	}
	sorted := slices.Clone(rates)
	slices.Sort(sorted)
	median := sorted[len(sorted)/2]
	var longest, run float64
	for _, iv := range rep.Intervals {
		if iv.Sum == nil || iv.Sum.Omitted {
			continue
		}
		if iv.Sum.BitsPerSecond < median/2 {
			run += iv.Sum.Seconds * (1 - iv.Sum.BitsPerSecond/median)
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return time.Duration(longest * float64(time.Second))
}
