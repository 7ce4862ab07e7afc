// Command intel_nic_hw is the emulated Intel NIC (82574L, i217-LM; package drivers/intel) as
// its own process, standing for the hardware: it serves the device session "Platform" to one
// driver (register page with posted writes, DMA memory, doorbell and interrupt eventfds), and
// its cable is a "Nic" session to the far end or (<wire type="tap"|"packet">) a TAP or AF_PACKET
// socket from the supervisor, clocking frames both ways at the link speed. The device and its
// wire run in components/intel_nic_hw/intelhw (ipxe_nic's tests run them too); handler.go is the
// glue to the supervisor.
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("intel_nic_hw"), func(c *component.Component) (component.Handler, error) {
		return NewHandler(c), nil
	}, component.OneP())
}
