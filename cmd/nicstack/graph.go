package main

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/hostservice"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

func init() {
	var cpus, svg string
	cmd := &cobra.Command{
		Use:   "graph [--cpus N|CORESxTHREADS] [--svg FILE] SCENARIO",
		Short: "Draw a scenario's components, CPUs and sessions as Graphviz DOT (or SVG)",
		Long: `graph prints the topology of a scenario (XML or HID, or a package's runtime file) as
Graphviz DOT, planned as run plans it, without starting anything: a node per <start> with its
binary (or program), its <affinity> and the CPUs it maps to, and the services it provides; the
parent with its <parent-provides>; an edge per session a component requests, from client to
server, with the service, the label the server sees and the route rule that chose the server.
A session the routes would deny is drawn dashed and red, with the reason. --cpus places the
starts on another machine than this one: N cores, or CORESxTHREADS (a 4-core PC with
hyperthreads is 4x2). --svg writes SVG to FILE instead, through Graphviz's dot.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := supervisor.LoadScenario(args[0])
			if err != nil {
				return err
			}
			topo, err := supervisor.ReadTopology()
			if cpus != "" {
				topo, err = supervisor.ParseTopology(cpus)
			}
			if err != nil {
				return err
			}
			dot := supervisor.Graph(sc, supervisor.GraphOptions{
				Components: components.Table, Topology: topo, ParentServices: hostservice.Services(),
			})
			if svg == "" {
				_, err := fmt.Fprint(cmd.OutOrStdout(), dot)
				return err
			}
			return writeSVG(dot, svg)
		},
	}
	cmd.Flags().StringVar(&cpus, "cpus", "", "place on N cores, or CORESxTHREADS, instead of this machine's CPUs")
	cmd.Flags().StringVar(&svg, "svg", "", "write SVG to this file (needs Graphviz's dot)")
	root.AddCommand(cmd)
}

// writeSVG renders dot to file with Graphviz's dot.
func writeSVG(dot, file string) error {
	path, err := exec.LookPath("dot")
	if err != nil {
		return errors.New("--svg needs Graphviz's dot, which is not on PATH (Debian: apt-get install graphviz); without --svg the DOT goes to stdout")
	}
	c := exec.Command(path, "-Tsvg", "-o", file)
	c.Stdin = bytes.NewReader([]byte(dot))
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("dot -Tsvg: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}
