// Command nicstack is the one command users type: run a scenario, check configs, show status,
// and run the benchmarks. Each subcommand lives in its own file and registers itself on root;
// the benchmarks' harness is a library (internal/bench/...), bench.go only parses their flags.
package main

import (
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
		fmt.Fprintln(os.Stderr, "nicstack:", err)
		os.Exit(1)
	}
}
