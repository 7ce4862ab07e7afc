package hwcomp

import (
	"fmt"

	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
)

func init() { component.RegisterSchema("intel_nic_hw", intel.ConfigSchema) }

// Handler is the intel_nic_hw component: it serves the device session "Platform" to one
// driver and the "Nic" session of the wire's far end.
type Handler struct {
	c        *component.Component
	nic      *NIC
	platform uint64 // the open Platform session's id
	wire     uint64 // the open Nic session's id
}

// NewHandler announces both services; the device exists once a driver opens Platform.
func NewHandler(c *component.Component) *Handler {
	c.Announce("Platform")
	c.Announce("Nic")
	return &Handler{c: c}
}

func (h *Handler) Configure(n *config.Node) error {
	for _, w := range config.Check(n, intel.ConfigSchema) {
		h.c.Log.Warn("config", "err", w)
	}
	cfg, err := intel.ParseConfig(n)
	if err != nil {
		return err
	}
	if h.nic == nil {
		h.nic = New(cfg, intel.NewCounters(h.c.Counter), NewCounters(h.c.Counter))
		return nil
	}
	h.nic.Configure(cfg)
	return nil
}

func (h *Handler) Open(s *component.Session) error {
	switch {
	case s.Service == "Platform" && s.Device():
		if err := h.nic.OpenDevice(s.Files); err != nil {
			return err
		}
		h.platform = s.ID
		h.c.Log.Info("driver attached", "label", s.Label)
	case s.Service == "Nic" && s.Server != nil:
		if err := h.nic.AttachWire(s.Server); err != nil {
			return err
		}
		h.wire = s.ID
		h.c.Log.Info("cable plugged in", "far_end", s.Label)
	default:
		return fmt.Errorf("intel_nic_hw serves Platform (a device session) and Nic, not %q", s.Service)
	}
	return nil
}

func (h *Handler) Close(s *component.Session) {
	switch s.ID {
	case h.platform:
		h.nic.CloseDevice()
		h.platform = 0
		h.c.Log.Info("driver detached")
	case h.wire:
		h.nic.DetachWire()
		h.wire = 0
		h.c.Log.Info("cable pulled", "far_end", s.Label)
	}
}
