package qemu

import (
	"fmt"
	"strconv"
	"strings"
)

// FindMarker finds the guest's first marker line "NICSTACK-GUEST: what ..." in console (a
// VM's, or a run's log with the guest's lines in it) and returns the rest after what and a
// space.
func FindMarker(console, what string) (string, bool) {
	for line := range strings.Lines(console) {
		// The marker may follow a log prefix or kernel messages on the same line.
		i := strings.Index(line, Marker+what+" ")
		if i >= 0 {
			return strings.TrimSpace(line[i+len(Marker+what+" "):]), true
		}
	}
	return "", false
}

// UserHZ is the unit of /proc/stat's times: clock ticks per second, 100 on every Linux.
const UserHZ = 100

// CPUTimes is /proc/stat's first line as the guest printed it (the "stat" markers of
// guest-scenario and guest-linux-router): clock ticks summed over the guest's CPUs.
type CPUTimes struct {
	Busy, All float64 // all but idle and iowait; all of them
}

// ParseCPUTimes reads /proc/stat's "cpu" line.
func ParseCPUTimes(line string) (CPUTimes, error) {
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return CPUTimes{}, fmt.Errorf("not /proc/stat's cpu line: %q", line)
	}
	var t CPUTimes
	for i, v := range f[1:9] { // guest and guest_nice, after steal, are in user and nice already
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("/proc/stat's cpu line %q: field %d: %v", line, i+1, err)
		}
		t.All += float64(n)
		if i != 3 && i != 4 { // idle, iowait
			t.Busy += float64(n)
		}
	}
	return t, nil
}

// Since is the time from earlier to t: the CPU used in percent of one CPU, and the wall
// time in seconds, for a guest with cpus CPUs.
func (t CPUTimes) Since(earlier CPUTimes, cpus int) (load, seconds float64) {
	all := max(t.All-earlier.All, 1)
	return (t.Busy - earlier.Busy) / all * float64(cpus) * 100, all / float64(cpus) / UserHZ
}
