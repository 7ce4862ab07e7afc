// Command nic_perf is Genode's packet-stream test tool: a UDP (or ICMP echo, or TCP) generator
// and sink on a Nic session, configured with rate, frame size, destination and duration; it
// logs its rates and counts frames in its counters. The generator is package nicperf;
// handler.go is the glue to the supervisor.
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("nic_perf"), func(c *component.Component) (component.Handler, error) {
		return NewHandler(c), nil
	})
}
