package ipxe

import (
	"fmt"
	"sort"
	"strings"
)

// Model is an Intel part the driver supports, known by its PCI device ID: the 82574L family
// (QEMU's e1000e is an 82574L) and the PCH-integrated i217, i218 and i219, which iPXE's
// intel driver serves with the same legacy descriptors and registers.
type Model struct {
	Name     string
	DeviceID uint16
	// PHYLosesSpeed: an ICH/PCH part whose PHY comes back at 10 Mbit/s after a reset, as
	// the i217-LM does in Genode's Sculpt; phy_reset="auto" leaves its PHY alone.
	PHYLosesSpeed bool
}

// VendorIntel is the PCI vendor ID of every supported part.
const VendorIntel = 0x8086

// models are the supported parts by device ID (Linux e1000e's hw.h names them).
var models = func() map[uint16]Model {
	m := map[uint16]Model{
		0x10D3: {Name: "82574L"}, 0x10F6: {Name: "82574LA"}, 0x150C: {Name: "82583V"},
	}
	for _, p := range []struct {
		name string
		ids  []uint16
	}{
		{"i217-LM", []uint16{0x153A}}, {"i217-V", []uint16{0x153B}},
		{"i218-LM", []uint16{0x155A, 0x15A0, 0x15A2}}, {"i218-V", []uint16{0x1559, 0x15A1, 0x15A3}},
		{"i219-LM", []uint16{0x156F, 0x15B7, 0x15B9, 0x15D7, 0x15E3, 0x15BD, 0x15BB, 0x15DF, 0x15E1,
			0x0D4E, 0x0D4C, 0x0D53, 0x15FB, 0x15F9, 0x15F4}},
		{"i219-V", []uint16{0x1570, 0x15B8, 0x15D8, 0x15D6, 0x15BE, 0x15BC, 0x15E0, 0x15E2,
			0x0D4F, 0x0D4D, 0x0D55, 0x15FC, 0x15FA, 0x15F5}},
	} {
		for _, id := range p.ids {
			m[id] = Model{Name: p.name, PHYLosesSpeed: true}
		}
	}
	for id, mod := range m {
		mod.DeviceID = id
		m[id] = mod
	}
	return m
}()

// LookupModel finds the part with PCI ids vendor:device; a device the driver does not
// support is an error that names it and what the driver supports.
func LookupModel(vendor, device uint16) (Model, error) {
	if m, ok := models[device]; ok && vendor == VendorIntel {
		return m, nil
	}
	names := map[string]bool{}
	for _, m := range models {
		names[m.Name] = true
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	return Model{}, fmt.Errorf("ipxe: PCI device %04x:%04x is not a NIC this driver supports (Intel %s)",
		vendor, device, strings.Join(list, ", "))
}
