// Command nic_perf is Genode's packet-stream test tool: a UDP (or ICMP echo) generator and
// sink on a Nic session, configured with rate, frame size, destination and duration; it logs
// its rates and counts frames in its counters (see package nicperf).
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/nicperf"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("nic_perf"), func(c *component.Component) (component.Handler, error) {
		return nicperf.NewHandler(c), nil
	})
}
