package main

import (
	"testing"

	"github.com/nicstack/nicstack/internal/testutil"
)

// A short `nicstack bench router` prints the table and writes one JSON object per frame size
// and routing mode with the documented keys, each run's ratio against its own direct run.
func TestBenchRouterJSON(t *testing.T) {
	for _, c := range []string{"nic_router", "nic_perf"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	points, out := runBenchJSON(t, "medians of 1 runs", 2, []string{"frame_bytes", "mode", "routed_mpps", "direct_mpps", "ratio", "router_cpu"},
		"router", "--time", "300ms", "--runs", "1", "--sizes", "64")
	for i, p := range points {
		if p["routed_mpps"].(float64) <= 0 || p["direct_mpps"].(float64) <= 0 || p["ratio"].(float64) <= 0 {
			t.Errorf("point %d moved nothing: %v\n%s", i, p, out)
		}
	}
	if points[0]["mode"] != "udp-forward" || points[1]["mode"] != "nat" {
		t.Errorf("modes %v and %v, want udp-forward and nat", points[0]["mode"], points[1]["mode"])
	}
}
