// Command linux_nic is the NIC driver for a Linux TAP device, as Genode's Linux-hosted NIC
// driver: it asks its parent for the TAP (service "Tap": the supervisor creates it with
// IFF_VNET_HDR and TSO/checksum offloads, its Linux side in the namespace the config names),
// and while it holds it, is an Uplink client of the router with its MAC. Super-frames pass
// whole with their offload metadata (components/internal/hostnic, the data path runtime/nicbridge).
//
//	<config tap_mtu="65520" offload="yes" netns="lan" address="198.18.0.1/24" mac="02:00:00:00:00:01"/>
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/components/internal/hostnic"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("linux_nic"), func(c *component.Component) (component.Handler, error) {
		return hostnic.NewHandler(c, hostnic.TapNIC), nil
	})
}
