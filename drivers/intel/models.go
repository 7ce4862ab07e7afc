// Package intel is an emulated Intel gigabit NIC (82574L / e1000e register layout): a register
// page, legacy descriptor rings in "DMA" memory shared with a driver, interrupt causes with the
// ITR throttle, and a PHY that negotiates a link speed and paces the wire. Its register map and
// the posted-write transport it drains are drivers/intel/regs, which the driver (drivers/ipxe)
// shares without importing the model. It is a model over memory and a Wire, not a
// process: components/intel_nic_hw/intelhw runs it as intel_nic_hw on a device session
// (drivers/intel/devsession) and plugs its wire into a session or a Linux interface.
package intel

// A Model is one Intel part the emulation can pose as.
type Model struct {
	Name     string
	DeviceID uint16 // PCI device ID, what a driver matches on
	// PHYResetDegrades: after a PHY reset the PHY's OEM bits are not reloaded from NVM and
	// auto-negotiation settles at 10 Mbit/s (ICH-class parts such as the i217-LM).
	PHYResetDegrades bool
}

// Models are the parts the emulation offers, selected by name.
var Models = []Model{
	{Name: "82574L", DeviceID: 0x10D3},
	{Name: "i217-LM", DeviceID: 0x153A, PHYResetDegrades: true},
}

// ModelByName finds a model by its name.
func ModelByName(name string) (Model, bool) {
	for _, m := range Models {
		if m.Name == name {
			return m, true
		}
	}
	return Model{}, false
}
