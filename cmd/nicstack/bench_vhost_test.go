package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/internal/testpmd"
	"github.com/nicstack/nicstack/internal/testutil"
)

// A short `nicstack bench vhost` (root, testpmd) at 64 bytes prints the busy-poll note and the
// table, and writes one JSON object with both setups' delivered rates, every process's CPU and
// the sink's per-queue counts; more queues than the back end serves are refused with the reason.
func TestBenchVhostJSON(t *testing.T) {
	testutil.RequireRoot(t)
	if err := testpmd.Installed(); err != nil {
		testutil.SkipOrFail(t, err.Error())
	}
	for _, c := range []string{"vm", "nic_router"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	points, out := runBenchJSON(t, "ours/DPDK", 1, []string{"frame_bytes", "queues", "runs", "nicstack", "dpdk", "rate_ratio", "middle_cpu_per_mpps_ratio", "sent_mpps_per_middle_cpu_ratio"},
		"vhost", "--time", "500ms", "--runs", "1", "--sizes", "64")
	if !strings.Contains(string(out), "testpmd busy-polls") {
		t.Errorf("no busy-poll note:\n%s", out)
	}
	for _, setup := range []string{"nicstack", "dpdk"} {
		s, _ := points[0][setup].(map[string]any)
		cpu, _ := s["cpu"].(map[string]any)
		queues, _ := s["sink_queue_frames"].([]any)
		if mpps, _ := s["delivered_mpps"].(float64); mpps <= 0 || cpu["gen"] == nil || cpu["sink"] == nil || len(queues) != 1 {
			t.Errorf("%s: %v\n%s", setup, s, out)
		}
	}
	if cpu := points[0]["nicstack"].(map[string]any)["cpu"].(map[string]any); cpu["nic_router"] == nil || cpu["vm_tx"] == nil {
		t.Errorf("our setup's CPU lacks the router or a vm: %v", cpu)
	}
	bin := testutil.Binary(t, "github.com/nicstack/nicstack/cmd/nicstack")
	if b, err := exec.Command(bin, "bench", "vhost", "--queues", "17").CombinedOutput(); err == nil || !strings.Contains(string(b), "at most 16 queue pairs") {
		t.Errorf("--queues 17: %v, %s; want a refusal naming the back end's bound", err, b)
	}
	t.Logf("%s", out)
}
