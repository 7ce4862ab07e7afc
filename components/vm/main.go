// Command vm is the VM-facing side of a scenario: a Nic client of the router with a guest
// behind it, picked by <config guest>: "embedded" (a user-space TCP/IP stack with a DHCP
// client and iperf, no privileges) or "netns" (a TAP into a network namespace the supervisor
// makes, Linux's own stack, a command run in it). See components/internal/guests.
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/components/internal/guests"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("vm"), func(c *component.Component) (component.Handler, error) {
		return guests.NewVM(c), nil
	})
}
