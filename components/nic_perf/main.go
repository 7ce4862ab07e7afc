// Command nic_perf is Genode's packet-stream test tool: a UDP (or ICMP echo) generator and
// sink on a Nic session, configured with rate, frame size, destination and duration; it logs
// its rates and counts frames in its counters (see package nicperf).
package main

import (
	"os"
	"runtime"

	"github.com/nicstack/nicstack/nicperf"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	// A nic_perf pinned to one CPU gets GOMAXPROCS 1, and then each of its waits in
	// epoll_wait (a blocking system call) longer than sysmon's 20 µs tick has its P taken
	// and sysmon woken again when it returns: two more threads switched in per wakeup on the
	// CPU it shares with a router. With a second P, sysmon leaves a waiting P alone (perf
	// sched, bench router at 64 B: half the receiver's context switches per frame).
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	component.Main(func(c *component.Component) (component.Handler, error) {
		return nicperf.NewHandler(c), nil
	})
}
