package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runGraph runs "nicstack graph ARGS..." in-process and returns stdout and the error. Flags
// persist on root between runs: the ones not given are set back to their defaults.
func runGraph(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd, _, err := root.Find([]string{"graph"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cpus", "svg"} {
		cmd.Flags().Set(f, "")
	}
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"graph"}, args...))
	defer root.SetArgs(nil)
	err = root.Execute()
	return out.String(), err
}

// seedGraph is how docs/seed.dot and docs/seed.svg (README's picture) are made; make graph
// runs it.
const seedGraph = "nicstack graph deploy/sculpt_iperf.hid --cpus 2"

// docs/seed.dot is what nicstack graph draws of the seed scenario today.
func TestSeedGraphCurrent(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	got, err := runGraph(t, strings.Fields(seedGraph)[2:]...)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("docs/seed.dot")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("docs/seed.dot is not what nicstack graph draws of the seed scenario now; run: make graph "+
			"(%s > docs/seed.dot; %s --svg docs/seed.svg)\ngot:\n%s", seedGraph, seedGraph, got)
	}
}

// Without Graphviz, --svg says what is missing.
func TestGraphSVGNeedsDot(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := runGraph(t, "--cpus", "2", "--svg", filepath.Join(t.TempDir(), "x.svg"), filepath.Join("..", "..", "deploy", "sculpt_iperf.hid"))
	if err == nil || !strings.Contains(err.Error(), "Graphviz's dot") {
		t.Fatalf("err %v, want one naming Graphviz's dot", err)
	}
}

// With Graphviz, --svg writes the picture (and nothing to stdout).
func TestGraphSVG(t *testing.T) {
	if _, err := exec.LookPath("dot"); err != nil {
		t.Skip("Graphviz's dot is not installed")
	}
	file := filepath.Join(t.TempDir(), "seed.svg")
	out, err := runGraph(t, "--cpus", "4x2", "--svg", file, filepath.Join("..", "..", "deploy", "sculpt_iperf.hid"))
	if err != nil || out != "" {
		t.Fatalf("%v, stdout %q", err, out)
	}
	if svg, err := os.ReadFile(file); err != nil || !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("nic_router")) {
		t.Fatalf("%s: %v\n%.200s", file, err, svg)
	}
}
