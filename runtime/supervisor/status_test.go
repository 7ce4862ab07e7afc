package supervisor

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The CPU clock counts what /proc's ticks count, to the nanosecond rather than truncated to 10 ms.
func TestProcStatsCPUTime(t *testing.T) {
	burn := func() {
		for start := time.Now(); time.Since(start) < 30*time.Millisecond; {
		}
	}
	burn()
	pid := os.Getpid()
	ticks := procTicks(t, pid)
	var prev cpuSample
	_, _, first := procStats(pid, &prev)
	if first < ticks || first > ticks+1 {
		t.Fatalf("CPU clock %.6f s against /proc's %.2f s", first, ticks)
	}
	burn()
	_, load, second := procStats(pid, &prev)
	if second <= first || load <= 0 {
		t.Fatalf("after burning CPU: time %.6f -> %.6f s, load %.1f %%", first, second, load)
	}
}

// A process that is gone has no CPU clock, and procStats reports nothing of it.
func TestProcStatsGoneProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, ok := processCPU(cmd.Process.Pid); ok {
		t.Fatalf("a CPU clock for exited pid %d", cmd.Process.Pid)
	}
	var prev cpuSample
	if rss, load, cpu := procStats(cmd.Process.Pid, &prev); rss != 0 || load != 0 || cpu != 0 {
		t.Fatalf("exited process: rss %d load %.1f cpu %.3f", rss, load, cpu)
	}
}

// procTicks is the process's utime plus stime from /proc, in seconds.
func procTicks(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return float64(ut+st) / clockTicks
}
