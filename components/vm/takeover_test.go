package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The vm killed with -9 in the middle of a QEMU guest's iperf over vhost-user: the supervisor
// holds the connection's state (component.Keep), the restarted vm resumes it, and the guest
// notices nothing: QEMU keeps its connection (no second one), and the iperf's one TCP
// connection carries traffic again and ends in a full report. The stall (the longest run of
// empty 0.1 s intervals in the guest's report) is logged, not asserted.
func TestVMKilledMidTransferOverVhostUser(t *testing.T) {
	r := startQEMUScenario(t, "qemu_iperf_vhost.xml", "--iperf=-c 198.18.0.2 -R -t 10", "--iperf=-c 198.18.0.2 -R -t 6 -i 0.1")
	waitLog(t, r, "[guest] [  1]   2.", 1) // the first interval past 2 s (its bounds drift with load)
	old := r.Kill("vm")
	r.WaitRestarted("vm", old)
	waitLog(t, r, `msg="front end's connection resumed"`, 1)
	waitLog(t, r, `guest\" exited with exit value 0`, 1)
	logs := r.Logs.String()
	for _, bad := range []string{`connection=2`, "cannot be resumed", "panic", "NICSTACK-GUEST: lease 10.0.1.", "iperf3: error"} {
		if bad == "NICSTACK-GUEST: lease 10.0.1." {
			if strings.Count(logs, bad) != 1 {
				t.Errorf("the guest took %d leases, want 1", strings.Count(logs, bad))
			}
			continue
		}
		if strings.Contains(logs, bad) {
			t.Errorf("the log holds %q", bad)
		}
	}
	if n := strings.Count(logs, "receiver\n"); n != 1 {
		t.Errorf("%d iperf results in the guest's log, want 1", n)
	}
	stall, after := iperfStall(logs)
	if after == 0 {
		t.Errorf("no traffic after the stall")
	}
	t.Logf("stall: %.1f s of empty 0.1 s intervals, then %d intervals with traffic", stall, after)
	for _, m := range iperfInterval.FindAllString(logs, -1) {
		if strings.Contains(m, "   1.9") || strings.Contains(m, "   2.") {
			t.Log(strings.TrimSpace(m)) // the intervals around the kill
		}
	}
	if vm := r.Component("vm").Counters; vm["vhost_faults"] != 0 || vm["vhost_rx_frames"] == 0 || vm["vhost_tx_frames"] == 0 {
		t.Errorf("the restarted vm's counters %v: want frames both ways, no fault", vm)
	}
}

var iperfInterval = regexp.MustCompile(`\[guest\] \[\s*\d+\]\s+([\d.]+)-([\d.]+)\s+sec\s+[\d.]+ \w*Bytes\s+([\d.]+) \w*bits/sec`)

// iperfStall is the longest run of empty intervals in the guest's iperf report, in seconds,
// and how many intervals with traffic came after it.
func iperfStall(logs string) (stall float64, after int) {
	run, longest := 0.0, 0.0
	for _, m := range iperfInterval.FindAllStringSubmatch(logs, -1) {
		from, _ := strconv.ParseFloat(m[1], 64)
		to, _ := strconv.ParseFloat(m[2], 64)
		rate, _ := strconv.ParseFloat(m[3], 64)
		if to-from > 0.5 {
			continue // a summary
		}
		if rate == 0 {
			run += to - from
			continue
		}
		if run > longest {
			longest, after = run, 0
		}
		run = 0
		after++
	}
	return max(longest, run), after
}
