// Command nic_perf is Genode's packet-stream test tool: a UDP generator and sink on the Nic
// sessions it serves (by <policy>) and requests (<nic-client>), with Genode's DHCP client
// and server and ARP; it logs each session's packets every period in Genode's words and
// exits with exit value 0 after count periods. nicstack's older form adds ICMP echo and TCP
// generation, rate, size and duration. The logic is package nicperf; handler.go is the glue
// to the supervisor.
package main

import (
	"os"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	// The process's real stderr, as the component's logger has it: go-plugin redirects
	// os.Stderr into its own stream once component.Main serves.
	stderr := os.Stderr
	component.Main(components.Lookup("nic_perf"), func(c *component.Component) (component.Handler, error) {
		return NewHandler(c, stderr), nil
	})
}
