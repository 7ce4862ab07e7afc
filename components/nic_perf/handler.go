package main

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/nicstack/nicstack/components/nic_perf/nicperf"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// clientLabel is what the period's log calls the session nic_perf requests, as Genode's does.
const clientLabel = "nic-client"

// Handler is the nic_perf component: it serves Nic and Uplink sessions (each runs what the
// <policy> selecting its label says) and requests one (<nic-client>, or the older form
// without service), runs a Perf on each, logs their packets every period and exits after
// count periods. A change of Genode's form reaches the open sessions as Genode's does (see
// Configure), its period_ms and count too; one of the older form applies to sessions opened
// later.
type Handler struct {
	c          *component.Component
	ctr        *nicperf.Counters
	cfg        nicperf.Config
	configured bool
	runs       map[uint64]*run
	clientReq  uint64 // the request of the session it is a client of, 0 while none
	// The period's log: the sessions in it, where it goes, and its goroutine.
	registry nicperf.Registry
	out      io.Writer
	stop     chan struct{}
	periods  sync.WaitGroup
	// churn: sessions opened so far, and the open ones by session id.
	churned        int
	churnOpen      map[uint64]bool
	opened, closed *atomic.Uint64
}

type run struct {
	perf    *nicperf.Perf
	label   string // of a session it serves; "" for its own client session
	running *nicperf.Running
	stats   *nicperf.Stats
}

// NewHandler returns the handler; it requests or announces its sessions when first
// configured. The period's log goes to out (the process's stderr, which the supervisor
// prefixes with the component's name, as Genode's LOG does).
func NewHandler(c *component.Component, out io.Writer) *Handler {
	return &Handler{c: c, ctr: nicperf.NewCounters(c.Counter), runs: map[uint64]*run{}, churnOpen: map[uint64]bool{},
		out: out, stop: make(chan struct{}), opened: c.Counter("sessions_opened"), closed: c.Counter("sessions_closed")}
}

func (h *Handler) Configure(typed any) error {
	cfg, err := component.ConfigOf[nicperf.Config](typed)
	if err != nil {
		return err
	}
	first := !h.configured
	h.cfg, h.configured = cfg, true
	if !first {
		if cfg.Genode {
			h.registry.Retime(cfg.Retime)
			h.reapply()
		}
		return nil
	}
	h.periods.Add(1)
	go func() {
		defer h.periods.Done()
		h.registry.Run(cfg.Period, cfg.Count, h.out, h.stop, h.c.Exit)
	}()
	if cfg.Service != "" {
		h.c.Announce(cfg.Service)
		if cfg.Genode {
			h.c.Announce("Uplink") // Genode's nic_perf serves both
		}
	}
	if cfg.Client {
		h.request()
	}
	return nil
}

// reapply applies a changed config of Genode's form as Genode's nic_perf does: each session
// it serves runs what the policy that now selects its label says (an empty policy when none
// does), and its <nic-client> session is closed and, if the config still has one, requested
// anew.
func (h *Handler) reapply() {
	for _, r := range h.runs {
		if r.label != "" {
			cfg, _ := h.cfg.Served(r.label)
			r.perf.Apply(cfg)
		}
	}
	if h.clientReq != 0 {
		h.c.Release(h.clientReq)
		h.clientReq = 0
	}
	if h.cfg.Client {
		h.request()
	}
}

// request asks for the session nic_perf is a client of.
func (h *Handler) request() {
	stream := packetstream.Config{QueueSize: h.cfg.QueueSize, BulkSize: h.cfg.BulkSize}
	var args map[string]string
	if h.cfg.Session == "Uplink" {
		args = map[string]string{"mac": h.cfg.UplinkMAC.String()}
	}
	h.clientReq = h.c.Request(h.cfg.Session, h.cfg.Label, args, stream, stream)
}

func (h *Handler) Open(s *component.Session) error {
	if h.cfg.Churn > 0 && s.Client != nil {
		h.churned++
		h.opened.Add(1)
		h.churnOpen[s.ID] = true
		h.c.Release(s.Request)
		if h.churned < h.cfg.Churn {
			h.request()
		}
		return nil
	}
	var out *packetstream.Source
	var in *packetstream.Sink
	cfg, name, served := h.cfg, clientLabel, ""
	if s.Server != nil {
		var ok bool
		if cfg, ok = h.cfg.Served(s.Label); !ok {
			return fmt.Errorf("no <policy> selects label %q, and there is no <default-policy>", s.Label)
		}
		out, in, name, served = s.Server.RX, s.Server.TX, s.Label, s.Label
	} else {
		out, in = s.Client.TX, s.Client.RX
	}
	p := nicperf.New(cfg, h.ctr, h.c.Log.With("session", s.Label))
	running, err := nicperf.Start(p, out, in, h.cfg.Spin)
	if err != nil {
		return err
	}
	r := &run{perf: p, label: served, running: running, stats: p.Stats()}
	h.registry.Add(name, r.stats)
	h.runs[s.ID] = r
	h.c.Log.Info("session up", "label", s.Label, "tx", cfg.TX, "size", cfg.Size, "rate", cfg.Rate)
	return nil
}

func (h *Handler) Close(s *component.Session) {
	if r := h.runs[s.ID]; r != nil {
		delete(h.runs, s.ID)
		h.end(r)
		return
	}
	if h.churnOpen[s.ID] {
		delete(h.churnOpen, s.ID)
		h.closed.Add(1)
	}
}

// Stop ends the period's log and the runs of sessions still open (Component.Stop closes them
// all first).
func (h *Handler) Stop() {
	close(h.stop)
	h.periods.Wait()
	for id, r := range h.runs {
		delete(h.runs, id)
		h.end(r)
	}
}

// end stops the run's goroutine, waits for it and takes its session out of the log.
func (h *Handler) end(r *run) {
	r.running.Stop()
	h.registry.Remove(r.stats)
}
