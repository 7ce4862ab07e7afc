// Command packet_nic is the NIC driver for a Linux interface through an AF_PACKET socket with
// TPACKET_V3 RX and TX rings: it asks its parent for the socket (service "Packet": the
// supervisor makes a veth pair, one end with the config's address in the namespace netns, and
// binds nothing), maps the rings on the interface the service names, and while it holds it, is
// an Uplink client of the router with its MAC. One RX block per wakeup, one TX kick per batch;
// rx_irq_throttle (ITR units of 256 ns) is the least interval between RX wakeups and, rounded
// up to whole ms, the block retire timeout (components/internal/hostnic, the data path runtime/nicbridge).
//
//	<config rx_irq_throttle="651" netns="lan" address="198.18.0.1/24" mtu="1500"/>
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/components/internal/hostnic"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("packet_nic"), func(c *component.Component) (component.Handler, error) {
		return hostnic.NewHandler(c, hostnic.PacketNIC), nil
	})
}
