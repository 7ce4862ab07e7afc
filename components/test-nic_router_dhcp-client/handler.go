package main

import (
	"fmt"

	"github.com/nicstack/nicstack/components/nic_perf/nicperf"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Handler is the test client.
type Handler struct {
	c          *component.Component
	cfg        nicperf.Config // a <nic-client> without <interface>: DHCP only
	configured bool
	perf       *nicperf.Perf
	running    *nicperf.Running
	linkUp     bool
	events     int // leases completed, counted as Genode's "Event N"
}

// NewHandler returns the client.
func NewHandler(c *component.Component) *Handler { return &Handler{c: c} }

// Configure asks for the Nic session once; the config (Genode's verbose) changes nothing.
func (h *Handler) Configure(any) error {
	if h.configured {
		return nil
	}
	n, err := config.Parse("client", []byte("<config> <nic-client/> </config>"))
	if err == nil {
		h.cfg, err = nicperf.ParseConfig(n, h.c.Name)
	}
	if err != nil {
		return err
	}
	h.configured = true
	h.c.Log.Info("Initialized")
	h.c.Request("Nic", "", nil, packetstream.DefaultConfig(), packetstream.DefaultConfig())
	return nil
}

func (h *Handler) Open(s *component.Session) error {
	if s.Client == nil {
		return fmt.Errorf("the client serves no sessions")
	}
	h.perf = nicperf.New(h.cfg, nicperf.NewCounters(h.c.Counter), h.c.Log)
	h.perf.OnLease(h.lease)
	running, err := nicperf.Start(h.perf, s.Client.TX, s.Client.RX, 0)
	if err != nil {
		return err
	}
	h.running, h.linkUp = running, true
	return nil
}

// Link starts the DHCP client over when the link comes up again, as Genode's client builds a
// new one on each link up.
func (h *Handler) Link(_ *component.Session, up bool) {
	if up && !h.linkUp && h.perf != nil {
		h.perf.Apply(h.cfg)
	}
	h.linkUp = up
}

// lease logs a completed lease in Genode's words (on the run's goroutine).
func (h *Handler) lease(l nicperf.Lease) {
	h.events++
	log := h.c.Log
	log.Info(fmt.Sprintf("Event %d, DHCP %s completed:", h.events, l.Completed))
	log.Info(fmt.Sprintf("  IP lease time: %d seconds", l.Seconds))
	log.Info(fmt.Sprintf("  Interface: %s", l.Interface))
	if l.Router.IsValid() {
		log.Info(fmt.Sprintf("  Router: %s", l.Router))
	}
	for i, a := range l.DNSServers {
		log.Info(fmt.Sprintf("  DNS server #%d: %s", i+1, a))
	}
	if l.DNSDomain != "" {
		log.Info("  DNS domain name: " + l.DNSDomain)
	}
}

func (h *Handler) Close(*component.Session) {
	if h.running != nil {
		h.running.Stop()
		h.running, h.perf = nil, nil
	}
}

func (h *Handler) Stop() {}
