// Command test-nic_router_dhcp-client is the client of Genode's nic_router_dhcp tests
// (os/src/test/nic_router_dhcp/client): a DHCP client on a Nic session that starts over
// each time the session's link comes up (a router's down-up advises its clients to
// re-request) and logs each lease it completes as Genode's does, DNS servers included.
// Its DHCP client is nic_perf's (package nicperf).
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("test-nic_router_dhcp-client"), func(c *component.Component) (component.Handler, error) {
		return NewHandler(c), nil
	})
}
