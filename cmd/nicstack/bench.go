package main

import "github.com/nicstack/nicstack/internal/bench"

func init() { root.AddCommand(bench.Command()) }
