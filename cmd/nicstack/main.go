// Command nicstack is the one command users type: run a scenario, check configs, show status,
// and run the benchmarks. Each subcommand lives in its own file and registers itself on root;
// the benchmarks' harness is a library (bench/...), bench.go only parses their flags.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

var root = &cobra.Command{
	Use:           "nicstack",
	Short:         "A component-based network stack modelled on Genode",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	if err := root.Execute(); err != nil {
		// A run ended by a child's propagated exit exits with its value (the supervisor
		// logged it).
		var exit interface{ ExitStatus() int }
		if errors.As(err, &exit) {
			os.Exit(exit.ExitStatus())
		}
		fmt.Fprintln(os.Stderr, "nicstack:", err)
		os.Exit(1)
	}
}
