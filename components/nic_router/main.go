// Command nic_router is Genode's NIC router as a nicstack component: it serves Uplink
// sessions (drivers, which pass their MAC as the session argument mac) and Nic sessions
// (applications, VMs), opens the <nic-client> sessions of its config, and routes frames
// between them by its config (package router) in one event loop over their packet streams
// (loop.go, port.go; handler.go is the glue to the supervisor).
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("nic_router"), func(c *component.Component) (component.Handler, error) {
		return NewHandler(c)
	})
}
