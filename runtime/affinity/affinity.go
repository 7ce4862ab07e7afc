// Package affinity pins processes to CPU sets. A child started while its parent's forking thread
// carries a mask inherits that mask on every thread from its first instruction, which
// sched_setaffinity on the child's pid after start cannot give (it pins one thread only).
package affinity

import (
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Set is a set of CPU numbers.
type Set []int

// String formats the set as Linux writes cpu lists: "0-1,3".
func (s Set) String() string {
	c := append(Set(nil), s...)
	sort.Ints(c)
	var b strings.Builder
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(c[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Parse reads a Linux cpu list such as "0-1,3".
func Parse(list string) (Set, error) {
	var s Set
	for _, part := range strings.Split(strings.TrimSpace(list), ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("cpu list %q: %q is not a cpu number", list, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpu list %q: bad range %q", list, part)
			}
		}
		for c := a; c <= b; c++ {
			s = append(s, c)
		}
	}
	return s, nil
}

func (s Set) mask() (*unix.CPUSet, error) {
	var m unix.CPUSet
	for _, c := range s {
		if c < 0 || c >= 1024 {
			return nil, fmt.Errorf("cpu %d out of range", c)
		}
		m.Set(c)
	}
	if m.Count() == 0 {
		return nil, fmt.Errorf("empty cpu set")
	}
	return &m, nil
}

// Current returns the CPU set of the calling thread.
func Current() (Set, error) {
	var m unix.CPUSet
	if err := unix.SchedGetaffinity(0, &m); err != nil {
		return nil, err
	}
	var s Set
	for c := 0; c < 1024; c++ {
		if m.IsSet(c) {
			s = append(s, c)
		}
	}
	return s, nil
}

// Run calls start (which forks, e.g. exec.Cmd.Start or a go-plugin client's Start) on a thread
// pinned to cpus, then restores the thread's mask. An empty set runs start unpinned.
func Run(cpus Set, start func() error) error {
	if len(cpus) == 0 {
		return start()
	}
	m, err := cpus.mask()
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return err
	}
	if err := unix.SchedSetaffinity(0, m); err != nil {
		return fmt.Errorf("pinning to cpus %s: %w", cpus, err)
	}
	defer unix.SchedSetaffinity(0, &old)
	return start()
}

// Yield gives the CPU to another runnable thread, if there is one (sched_yield). A producer
// calls it when its consumer falls behind: a consumer sharing the CPU cannot catch up while
// the producer keeps its time slice (4 ms at HZ 250), and everything produced meanwhile is
// dropped at the full queue. On a CPU of its own it is a cheap system call.
func Yield() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
