package main

import (
	"fmt"
	"maps"

	"github.com/nicstack/nicstack/components/intel_nic_hw/intelhw"
	"github.com/nicstack/nicstack/drivers/afpacket"
	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/tap"
	"github.com/nicstack/nicstack/runtime/component"
)

// Handler is the intel_nic_hw component: it serves the device session "Platform" to one
// driver and the "Nic" session of the wire's far end, or (<wire type="tap"> or "packet")
// requests its wire from the supervisor's parent service Tap or Packet.
type Handler struct {
	c        *component.Component
	nic      *intelhw.NIC
	platform uint64 // the open Platform session's id
	wire     uint64 // the open Nic session's id, or the open Tap/Packet session's

	wireCfg intel.WireConfig // as first configured: the wire is fixed while the NIC runs
	wireReq uint64           // the Tap or Packet request
}

// NewHandler announces both services; the device exists once a driver opens Platform.
func NewHandler(c *component.Component) *Handler {
	c.Announce("Platform")
	c.Announce("Nic")
	return &Handler{c: c}
}

func (h *Handler) Configure(typed any) error {
	cfg, err := component.ConfigOf[intel.Config](typed)
	if err != nil {
		return err
	}
	if h.nic == nil {
		h.nic = intelhw.New(cfg.Device, intel.NewCounters(h.c.Counter), intelhw.NewCounters(h.c.Counter))
		h.c.Queue("wire rx", h.nic.WireQueue)
		h.wireCfg = cfg.Wire
		if cfg.Wire.Service != "" {
			h.wireReq = h.c.RequestDevice(cfg.Wire.Service, "", cfg.Wire.Args, component.DeviceSpec{})
		}
		return nil
	}
	if cfg.Wire.Type != h.wireCfg.Type || !maps.Equal(cfg.Wire.Args, h.wireCfg.Args) {
		h.c.Log.Warn("config: <wire> changed; the wire stays as it is until the component restarts")
	}
	h.nic.Configure(cfg.Device)
	return nil
}

// openPort makes the port of the Tap or Packet session s and plugs it in.
func (h *Handler) openPort(s *component.Session) error {
	if len(s.Files) != 1 {
		return fmt.Errorf("intel_nic_hw: %s session with %d files, want 1", s.Service, len(s.Files))
	}
	var p intelhw.Port
	switch h.wireCfg.Type {
	case intel.WireTap:
		d, err := tap.FromFile(s.Files[0])
		if err != nil {
			return err
		}
		p = intelhw.TapPort(d)
	case intel.WirePacket:
		ifname := s.Args["interface"]
		if ifname == "" {
			return fmt.Errorf("intel_nic_hw: Packet session without an interface argument")
		}
		sock, err := afpacket.FromFile(s.Files[0], afpacket.Config{Interface: ifname})
		if err != nil {
			return err
		}
		p = intelhw.PacketPort(sock)
	default:
		return fmt.Errorf("intel_nic_hw: a %s session, but the wire is %q", s.Service, h.wireCfg.Type)
	}
	if err := h.nic.AttachPort(p); err != nil {
		p.Close()
		return err
	}
	return nil
}

func (h *Handler) Open(s *component.Session) error {
	switch {
	case h.wireReq != 0 && s.Request == h.wireReq && s.Service == h.wireCfg.Service && s.Device():
		if err := h.openPort(s); err != nil {
			return err
		}
		h.wire = s.ID
		h.c.Log.Info("cable plugged in", "wire", h.wireCfg.Type, "args", s.Args)
	case s.Service == "Platform" && s.Device():
		if err := h.nic.OpenDevice(s.Files); err != nil {
			return err
		}
		h.platform = s.ID
		h.c.Log.Info("driver attached", "label", s.Label)
	case s.Service == "Nic" && s.Server != nil:
		if h.wireCfg.Service != "" {
			return fmt.Errorf("intel_nic_hw: the cable leads to a %s (<wire type=%q>), not to a Nic session", h.wireCfg.Service, h.wireCfg.Type)
		}
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

// Stop ends the device's and the wire's goroutines, should a session still hold them.
func (h *Handler) Stop() {
	if h.nic != nil {
		h.nic.CloseDevice()
		h.nic.DetachWire()
	}
}
