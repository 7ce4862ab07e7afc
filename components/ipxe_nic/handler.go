package main

import (
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/nicstack/nicstack/drivers/intel/devsession"
	"github.com/nicstack/nicstack/drivers/ipxe"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Handler is the ipxe_nic component: a Platform client of the emulated NIC (or, with pci, of
// its parent, which hands over a PCI device's VFIO group) and, while the link is up, an
// Uplink client of the router.
type Handler struct {
	c    *component.Component
	port *Port
	pci  string // the PCI device driven through VFIO; "": the emulated NIC

	mu       sync.Mutex // the uplink request, changed from the interrupt loop
	uplink   uint64     // request id while the link is up
	platform uint64     // open session ids
	upSess   uint64
	stopCPU  chan struct{} // ends TrackCPU
}

// cpuInterval is how often the cpu_us counter is brought up to date.
const cpuInterval = 250 * time.Millisecond

// NewHandler requests the device once configured.
func NewHandler(c *component.Component) *Handler {
	h := &Handler{c: c, stopCPU: make(chan struct{})}
	go TrackCPU(c.Counter("cpu_us"), cpuInterval, h.stopCPU)
	return h
}

func (h *Handler) Configure(typed any) error {
	cfg, err := component.ConfigOf[ipxe.Config](typed)
	if err != nil {
		return err
	}
	if h.port != nil {
		if cfg.PCI != h.pci {
			return fmt.Errorf("ipxe_nic: pci=%q cannot change to %q while the driver runs (a new version restarts it)", h.pci, cfg.PCI)
		}
		return h.port.Configure(cfg)
	}
	h.port = New(cfg, ipxe.NewCounters(h.c.Counter), h.c.Log, h.link)
	h.c.Queue("tx ring", h.port.TXQueue)
	h.c.Queue("rx ring", h.port.RXQueue)
	h.pci = cfg.PCI
	if h.pci != "" { // the parent's Platform service opens the device's VFIO group
		h.c.RequestDevice("Platform", "", map[string]string{"pci": h.pci}, component.DeviceSpec{})
		return nil
	}
	h.c.RequestDevice("Platform", "", nil, component.DeviceSpec{Mems: devsession.Mems(ipxe.DMASize), Eventfds: devsession.Eventfds})
	return nil
}

// link holds the Uplink session exactly while the link is up.
func (h *Handler) link(up bool, speed int, mac net.HardwareAddr) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case up && h.uplink == 0:
		cfg := packetstream.DefaultConfig()
		h.uplink = h.c.Request("Uplink", "uplink", map[string]string{"mac": mac.String()}, cfg, cfg)
		h.c.Log.Info("link up", "speed_mbit", speed, "mac", mac.String())
	case !up && h.uplink != 0:
		h.c.Release(h.uplink)
		h.uplink = 0
		h.c.Log.Info("link down")
	}
}

func (h *Handler) Open(s *component.Session) error {
	switch {
	case s.Service == "Platform" && s.Device():
		open := h.port.OpenDevice
		if h.pci != "" {
			open = func(files []*os.File) error { return h.port.OpenPCI(files, h.pci) }
		}
		if err := open(s.Files); err != nil {
			return err
		}
		h.platform = s.ID
		h.c.Log.Info("device opened", "mac", h.port.MAC().String())
	case s.Service == "Uplink" && s.Client != nil:
		h.mu.Lock()
		current := s.Request == h.uplink
		h.mu.Unlock()
		if !current {
			return fmt.Errorf("ipxe_nic: the Uplink session of request %d was released when the link went down", s.Request)
		}
		if err := h.port.AttachUplink(s.Client); err != nil {
			return err
		}
		h.upSess = s.ID
	default:
		return fmt.Errorf("ipxe_nic has no use for a %q session", s.Service)
	}
	return nil
}

func (h *Handler) Close(s *component.Session) {
	switch s.ID {
	case h.platform:
		h.port.DetachUplink()
		h.port.CloseDevice()
		h.platform = 0
		h.c.Log.Info("device gone")
	case h.upSess:
		h.port.DetachUplink()
		h.upSess = 0
	}
}

// Stop ends the uplink and interrupt loops, should a session still hold them, and the CPU
// tracking.
func (h *Handler) Stop() {
	if h.port != nil {
		h.port.DetachUplink()
		h.port.CloseDevice()
	}
	close(h.stopCPU)
}
