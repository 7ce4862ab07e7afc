package cni

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/netns"
)

// BenchmarkPodChurn is the cost of pods coming and going on a node (deploy/cni.hid, the plugin
// run as a container runtime runs it). It reports:
//   - add-ms: an ADD's latency, from the plugin's start to its exit (it exits once the pod's
//     interface is up with its address and route), median and maximum over 16 pods added one
//     after another on the idle node;
//   - add-load-ms: the same while a pod's iperf3 runs through the router;
//   - stall-ms: that iperf3's longest stall while the 16 pods are added and deleted: the
//     longest run of its 100 ms intervals that carried less than a tenth of the median
//     interval before the churn began (0: none did); slowest-%: its slowest interval during the
//     churn against that median.
//
// Run as root: go test -run '^$' -bench PodChurn -benchtime 1x ./internal/cni
func BenchmarkPodChurn(b *testing.B) {
	testutil.RequireCommand(b, "iperf3")
	n := startNode(b)
	add := func(i int, ns *netns.NS) time.Duration {
		start := time.Now()
		if _, err := n.plugin("ADD", fmt.Sprintf("pod%d", i), ns.File.Name(), n.static(i), nil); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	del := func(i int, ns *netns.NS) {
		if _, err := n.plugin("DEL", fmt.Sprintf("pod%d", i), ns.File.Name(), "", nil); err != nil {
			b.Fatal(err)
		}
	}
	const pods = 16
	spaces := make([]*netns.NS, pods+1) // the last one is the iperf's
	b.Cleanup(func() {
		for _, ns := range spaces {
			if ns != nil {
				ns.Close()
			}
		}
	})
	for i := range spaces {
		ns, err := netns.New("pod")
		if err != nil {
			b.Fatal(err)
		}
		spaces[i] = ns
	}
	churn := func() (adds []time.Duration) {
		for i, ns := range spaces[:pods] {
			adds = append(adds, add(i, ns))
		}
		for i, ns := range spaces[:pods] {
			del(i, ns)
		}
		return adds
	}
	bulk := spaces[pods]
	add(pods, bulk)
	if err := pingFar(bulk); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		idle := churn()
		// The iperf runs 2 s before the churn and long enough to outlast it (bounded: 60 s).
		iperf := exec.Command("ip", "netns", "exec", bulk.Name, "iperf3", "-c", "198.18.0.2", "-t", "60", "-i", "0.1", "-J")
		out := &testutil.SyncBuffer{}
		iperf.Stdout = out
		if err := iperf.Start(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		time.Sleep(2 * time.Second)
		from := time.Since(start)
		loaded := churn()
		to := time.Since(start)
		iperf.Process.Signal(syscall.SIGINT) // iperf3 prints its report on SIGINT
		iperf.Wait()
		stall, slowest, err := longestStall([]byte(out.String()), from, to)
		if err != nil {
			b.Fatal(err)
		}
		report(b, "add", idle)
		report(b, "add-load", loaded)
		b.ReportMetric(float64(stall.Milliseconds()), "stall-ms")
		b.ReportMetric(slowest*100, "slowest-%")
		b.Logf("ADD on the idle node: %s; during an iperf: %s; the iperf's longest stall while 16 pods came and went (%.1f s): %v, its slowest 100 ms %.0f %% of the median",
			latencies(idle), latencies(loaded), (to - from).Seconds(), stall, slowest*100)
	}
	del(pods, bulk)
}

func report(b *testing.B, name string, d []time.Duration) {
	s := slices.Sorted(slices.Values(d))
	b.ReportMetric(float64(s[len(s)/2].Microseconds())/1e3, name+"-median-ms")
	b.ReportMetric(float64(s[len(s)-1].Microseconds())/1e3, name+"-max-ms")
}

// longestStall reads iperf3's JSON report (100 ms intervals) and returns the longest run of
// intervals within [from, to) of the test that carried less than a tenth of the median
// interval before from, and the slowest such interval's share of that median.
func longestStall(report []byte, from, to time.Duration) (time.Duration, float64, error) {
	var r struct {
		Intervals []struct {
			Sum struct {
				Start   float64 `json:"start"`
				Seconds float64 `json:"seconds"`
				Bytes   float64 `json:"bytes"`
			} `json:"sum"`
		} `json:"intervals"`
	}
	if err := json.Unmarshal(report, &r); err != nil {
		return 0, 0, fmt.Errorf("iperf3's report: %v", err)
	}
	var before []float64
	for _, iv := range r.Intervals {
		if iv.Sum.Start+iv.Sum.Seconds <= from.Seconds() && iv.Sum.Seconds > 0 {
			before = append(before, iv.Sum.Bytes/iv.Sum.Seconds)
		}
	}
	if len(before) == 0 {
		return 0, 0, fmt.Errorf("iperf3 reported no interval before the churn")
	}
	slices.Sort(before)
	median := before[len(before)/2]
	var longest, run time.Duration
	slowest := 1e9
	for _, iv := range r.Intervals {
		if iv.Sum.Start < from.Seconds() || iv.Sum.Start >= to.Seconds() || iv.Sum.Seconds <= 0 {
			continue
		}
		rate := iv.Sum.Bytes / iv.Sum.Seconds
		slowest = min(slowest, rate/median)
		if rate < median/10 {
			run += time.Duration(iv.Sum.Seconds * float64(time.Second))
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest, slowest, nil
}
