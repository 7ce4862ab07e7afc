// Package bench is what the benchmarks behind `nicstack bench` share: running a point's
// scenario under its own supervisor, the machine's load, medians and the --json output. It is
// not a benchmark itself (those are its sub-packages, one per `nicstack bench` command) and
// knows nothing of flags.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/hostservice"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// PrintLoad prints the machine's load average, before and after a benchmark: numbers taken
// on a busy machine say so.
func PrintLoad(out io.Writer) {
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(out, "load average: %s", load)
	}
}

// WriteJSON writes a benchmark's points to path (--json), indented.
func WriteJSON(path string, points any) error {
	b, err := json.MarshalIndent(points, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Components says where a benchmark finds the component binaries and whether it shows their
// logs: the settings of every benchmark that runs scenarios.
type Components struct {
	Bins    []string  // folders with component binaries, searched in order
	Verbose bool      // the components' logs on stderr
	Logs    io.Writer // when set, also gets the components' logs
}

// Scenario is a benchmark point's scenario running under a fresh supervisor in its own
// temporary folder.
type Scenario struct {
	S *supervisor.Supervisor
	// Done receives the supervisor's Run result; whoever reads it early puts it back.
	Done chan error

	cancel context.CancelFunc
	dir    string // the temporary folder
}

// StartScenario checks text against the component table and the binaries in c.Bins, and runs
// it. name names the temporary folder.
func (c Components) StartScenario(ctx context.Context, name string, text []byte) (*Scenario, error) {
	dir, err := os.MkdirTemp("", "nicstack-bench-"+name+"-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o711); err != nil { // the components' users pass through to the run folder
		return nil, err
	}
	path := filepath.Join(dir, "scenario.xml")
	var logs io.Writer = io.Discard
	if c.Verbose {
		logs = os.Stderr
	}
	if c.Logs != nil {
		logs = io.MultiWriter(logs, c.Logs)
	}
	var s *supervisor.Supervisor
	if err = os.WriteFile(path, text, 0o644); err == nil {
		// What the components would refuse fails the bench now, not after its time-out.
		if errs := supervisor.Check(path, text, c.Bins, components.Table); len(errs) > 0 {
			err = errors.Join(errs...)
		}
	}
	if err == nil {
		s, err = supervisor.New(path, supervisor.Options{BinDirs: c.Bins, Components: components.Table, ParentServices: hostservice.Services(), Out: supervisor.NewOutput(logs, false), RunDir: filepath.Join(dir, "run")})
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return &Scenario{S: s, Done: done, cancel: cancel, dir: dir}, nil
}

// Stop ends the run and removes its folder.
func (sc *Scenario) Stop() {
	sc.cancel()
	<-sc.Done
	os.RemoveAll(sc.dir)
}

// WaitFor polls ready every 50 ms until it holds or timeout passes, and says which came first:
// a scenario's components take a moment to start and to pass their first frames.
func WaitFor(timeout time.Duration, ready func() bool) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		if ready() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// Median is the median of f over xs (the mean of the middle two for an even count; 0 for none).
func Median[T any](xs []T, f func(T) float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// TreeTicks is the user and system time, in USER_HZ ticks (/proc/PID/stat fields 14 and 15),
// of pid and its descendants now alive: a process's CPU as every bench reads it from /proc.
func TreeTicks(pid int) uint64 {
	var sum uint64
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 12 {
			ut, _ := strconv.ParseUint(f[11], 10, 64)
			st, _ := strconv.ParseUint(f[12], 10, 64)
			sum = ut + st
		}
	}
	children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, f := range strings.Fields(string(children)) {
		if child, err := strconv.Atoi(f); err == nil {
			sum += TreeTicks(child)
		}
	}
	return sum
}
