package main

import "github.com/spf13/cobra"

// benchCmd is the parent of the benchmarks (`nicstack bench stream`, `nicstack bench router`,
// ...); each benchmark's file adds itself to it in an init.
var benchCmd = &cobra.Command{
	Use:   "bench",
	Short: "Run a benchmark and print its numbers",
}

func init() { root.AddCommand(benchCmd) }
