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
	bin := testutil.Binary(t, "github.com/nicstack/nicstack/cmd/nicstack")
	out := filepath.Join(t.TempDir(), "stream.json")
	cmd := exec.Command(bin, "bench", "stream", "--time", "200ms", "--runs", "1", "--sizes", "64,1500", "--json", out)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !strings.Contains(string(b), "medians of 1 runs") {
		t.Fatalf("no table:\n%s", b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var points []map[string]float64
	if err := json.Unmarshal(data, &points); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(points) != 2 {
		t.Fatalf("%d points, want 2", len(points))
	}
	for i, p := range points {
		for _, k := range []string{"frame_bytes", "mpps", "gbps", "signals_per_kframe", "reference_mpps"} {
			if _, ok := p[k]; !ok {
				t.Errorf("point %d lacks %q", i, k)
			}
		}
		if p["mpps"] <= 0 || p["reference_mpps"] <= 0 {
			t.Errorf("point %d moved nothing: %v", i, p)
		}
	}
}
