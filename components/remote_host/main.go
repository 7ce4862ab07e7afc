// Command remote_host is the far end of the wire for scenarios without root: an embedded
// TCP/IP stack with a static address, a Nic client of the emulated NIC's wire (or an Uplink
// client of the router when no NIC is in the scenario), running the iperf server. See
// components/internal/guests.
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/components/internal/guests"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("remote_host"), func(c *component.Component) (component.Handler, error) {
		return guests.NewEmbedded(c), nil
	})
}
