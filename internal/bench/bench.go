// Package bench is nicstack's benchmark harness: the stream, router, driver and iperf benches
// with their references, run as `nicstack bench ...` (Command). It starts scenarios under a
// supervisor and reads their counters; it is not a component and holds no packet path.
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

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/runtime/hostservice"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// benchCmd is the parent of the benchmarks (`nicstack bench stream`, `nicstack bench router`,
// ...); each benchmark's file adds itself to it in an init.
var benchCmd = &cobra.Command{
	Use:   "bench",
	Short: "Run a benchmark and print its numbers",
}

// Command is `nicstack bench` with every benchmark under it, for the CLI to add.
func Command() *cobra.Command { return benchCmd }

// printLoad prints the machine's load average, before and after a benchmark: numbers taken
// on a busy machine say so.
func printLoad(out io.Writer) {
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(out, "load average: %s", load)
	}
}

// writeJSON writes a benchmark's points to path (--json), indented.
func writeJSON(path string, points any) error {
	b, err := json.MarshalIndent(points, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// startBenchScenario runs a benchmark point's scenario (text) under a fresh supervisor in its
// own temporary folder. done receives Run's result (whoever reads it early puts it back);
// stop ends the run and removes the folder.
func startBenchScenario(ctx context.Context, name string, text []byte, bins []string, verbose bool) (s *supervisor.Supervisor, done chan error, stop func(), err error) {
	dir, err := os.MkdirTemp("", "nicstack-bench-"+name+"-")
	if err != nil {
		return nil, nil, nil, err
	}
	path := filepath.Join(dir, "scenario.xml")
	var logs io.Writer = io.Discard
	if verbose {
		logs = os.Stderr
	}
	if err = os.WriteFile(path, text, 0o644); err == nil {
		// What the components would refuse fails the bench now, not after its time-out.
		if errs := supervisor.Check(path, text, bins, components.Table); len(errs) > 0 {
			err = errors.Join(errs...)
		}
	}
	if err == nil {
		s, err = supervisor.New(path, supervisor.Options{BinDirs: bins, Components: components.Table, ParentServices: hostservice.Services(), Out: supervisor.NewOutput(logs, false), RunDir: filepath.Join(dir, "run")})
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done = make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return s, done, func() { cancel(); <-done; os.RemoveAll(dir) }, nil
}

// median is the median of f over xs (the mean of the middle two for an even count; 0 for none).
func median[T any](xs []T, f func(T) float64) float64 {
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
