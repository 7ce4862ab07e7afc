package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/internal/testutil"
)

// A short `nicstack bench stream` prints the table and writes one JSON object per frame size
// with the documented keys; the numbers themselves are the benchmark's business, not a test's.
func TestBenchStreamJSON(t *testing.T) {
	points, _ := runBenchJSON(t, "medians of 1 runs", 2, []string{"frame_bytes", "mpps", "gbps", "signals_per_kframe", "reference_mpps"},
		"stream", "--time", "200ms", "--runs", "1", "--sizes", "64,1500")
	for i, p := range points {
		if p["mpps"].(float64) <= 0 || p["reference_mpps"].(float64) <= 0 {
			t.Errorf("point %d moved nothing: %v", i, p)
		}
	}
}

// runBenchJSON runs `nicstack bench ARGS --json FILE` and checks that it printed its table
// (the text table shows) and wrote want points, each with every key in keys; it returns the
// points and the output.
func runBenchJSON(t *testing.T, table string, want int, keys []string, args ...string) ([]map[string]any, []byte) {
	t.Helper()
	bin := testutil.Binary(t, "github.com/nicstack/nicstack/cmd/nicstack")
	out := filepath.Join(t.TempDir(), "bench.json")
	b, err := exec.Command(bin, append(append([]string{"bench"}, args...), "--json", out)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !strings.Contains(string(b), table) {
		t.Fatalf("no table (%q):\n%s", table, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var points []map[string]any
	if err := json.Unmarshal(data, &points); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(points) != want {
		t.Fatalf("%d points, want %d: %s", len(points), want, data)
	}
	for i, p := range points {
		for _, k := range keys {
			if _, ok := p[k]; !ok {
				t.Errorf("point %d lacks %q: %v", i, k, p)
			}
		}
	}
	return points, b
}
