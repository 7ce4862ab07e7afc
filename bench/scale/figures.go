package scale

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Jain is Jain's fairness index of xs, (Σx)² / (n·Σx²): 1 when all are equal, 1/n when one
// has everything; 0 for none or all zero.
func Jain(xs []float64) float64 {
	var sum, squares float64
	for _, x := range xs {
		sum += x
		squares += x * x
	}
	if squares == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * squares)
}

// PSS is a process's proportional set size in bytes: its private pages and its share of each
// page it shares (a shared page counts 1/n in each of the n processes that map it), from
// /proc/PID/smaps_rollup.
func PSS(pid int) (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parsePSS(f)
}

// parsePSS reads the Pss line of smaps_rollup ("Pss:   1234 kB").
func parsePSS(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "Pss:" {
			continue
		}
		if f[2] != "kB" {
			return 0, fmt.Errorf("smaps_rollup: Pss in %q, want kB", f[2])
		}
		kb, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("smaps_rollup: Pss %q: %v", f[1], err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("smaps_rollup: no Pss line")
}

// ownCPUSeconds is this process's user and system time: the supervisor's (and the bench's,
// which sleeps while an idle window is measured).
func ownCPUSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// renice sets the nice value of every thread of process pid (Linux's nice is per thread; the
// threads the process makes later inherit it from their maker).
func renice(pid, nice int) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil {
			return fmt.Errorf("nice %d for thread %d of %d: %v", nice, tid, pid, err)
		}
	}
	return nil
}
