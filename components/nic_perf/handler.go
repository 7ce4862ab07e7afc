package main

import (
	"sync"
	"sync/atomic"

	"github.com/nicstack/nicstack/nicperf"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Handler is the nic_perf component: a Nic client (or, with service="Nic", a Nic server) that
// runs a Perf on each of its sessions. A config change applies to sessions opened later.
type Handler struct {
	c          *component.Component
	ctr        *nicperf.Counters
	cfg        nicperf.Config
	configured bool
	runs       map[uint64]*run
	// churn: sessions opened so far, and the open ones by session id.
	churned        int
	churnOpen      map[uint64]bool
	opened, closed *atomic.Uint64
}

type run struct {
	stop atomic.Bool
	w    *packetstream.Waiter
	done sync.WaitGroup
}

// NewHandler returns the handler; it requests or announces its session when first configured.
func NewHandler(c *component.Component) *Handler {
	return &Handler{c: c, ctr: nicperf.NewCounters(c.Counter), runs: map[uint64]*run{}, churnOpen: map[uint64]bool{},
		opened: c.Counter("sessions_opened"), closed: c.Counter("sessions_closed")}
}

func (h *Handler) Configure(n *config.Node) error {
	cfg, err := nicperf.ParseConfig(n, h.c.Name)
	if err != nil {
		return err
	}
	first := !h.configured
	h.cfg, h.configured = cfg, true
	if !first {
		return nil
	}
	if cfg.Service != "" {
		h.c.Announce(cfg.Service)
		return nil
	}
	stream := packetstream.Config{QueueSize: cfg.QueueSize, BulkSize: cfg.BulkSize}
	var args map[string]string
	if cfg.Session == "Uplink" {
		args = map[string]string{"mac": cfg.UplinkMAC.String()}
	}
	h.c.Request(cfg.Session, cfg.Label, args, stream, stream)
	return nil
}

func (h *Handler) Open(s *component.Session) error {
	if h.cfg.Churn > 0 && s.Client != nil {
		h.churned++
		h.opened.Add(1)
		h.churnOpen[s.ID] = true
		h.c.Release(s.Request)
		if h.churned < h.cfg.Churn {
			stream := packetstream.Config{QueueSize: h.cfg.QueueSize, BulkSize: h.cfg.BulkSize}
			h.c.Request(h.cfg.Session, h.cfg.Label, nil, stream, stream)
		}
		return nil
	}
	var out *packetstream.Source
	var in *packetstream.Sink
	if s.Server != nil {
		out, in = s.Server.RX, s.Server.TX
	} else {
		out, in = s.Client.TX, s.Client.RX
	}
	w, err := packetstream.NewWaiter(out, in)
	if err != nil {
		return err
	}
	w.Spin = h.cfg.Spin
	r := &run{w: w}
	p := nicperf.New(h.cfg, h.ctr, h.c.Log.With("session", s.Label))
	r.done.Add(1)
	go func() {
		defer r.done.Done()
		p.Run(out, in, w, &r.stop)
	}()
	h.runs[s.ID] = r
	h.c.Log.Info("session up", "label", s.Label, "tx", h.cfg.TX, "size", h.cfg.Size, "rate", h.cfg.Rate)
	return nil
}

func (h *Handler) Close(s *component.Session) {
	if r := h.runs[s.ID]; r != nil {
		delete(h.runs, s.ID)
		r.end()
		return
	}
	if h.churnOpen[s.ID] {
		delete(h.churnOpen, s.ID)
		h.closed.Add(1)
	}
}

// Stop ends the runs of sessions still open (Component.Stop closes them all first).
func (h *Handler) Stop() {
	for id, r := range h.runs {
		delete(h.runs, id)
		r.end()
	}
}

// end stops the run's goroutine and waits for it.
func (r *run) end() {
	r.stop.Store(true)
	r.w.Wake()
	r.done.Wait()
	r.w.Close()
}
