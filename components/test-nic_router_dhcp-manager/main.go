// Command test-nic_router_dhcp-manager is the manager of Genode's nic_router_dhcp_managed
// test (os/src/test/nic_router_dhcp/manager): it reads nic_router_2's state report (ROM
// "router_state") and writes nic_router_2's config (Report "router_config"), whose DHCP
// server hands out the DNS config nic_router_2's uplink got by DHCP: the forwarding
// dns_config_from does inside the router, done by a component.
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("test-nic_router_dhcp-manager"), func(c *component.Component) (component.Handler, error) {
		return NewHandler(c), nil
	})
}
