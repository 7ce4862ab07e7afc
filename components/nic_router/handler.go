package main

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router"
	"github.com/nicstack/nicstack/router/model"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Handler is the nic_router component: it serves Uplink and Nic sessions, opens the
// <nic-client> sessions of its config, and runs one Loop over all of them.
type Handler struct {
	c          *component.Component
	loop       *Loop
	attached   map[uint64]*Attachment        // by session id
	sessions   map[uint64]*component.Session // the open ones, by id
	nicClients map[string]uint64             // <nic-client> label -> request id
	clientOf   map[uint64]string             // request id -> <nic-client> label
	clientMAC  map[uint64]uint16             // request id -> the suffix of the router's MAC there
	macInUse   map[uint16]bool               // clientMAC's values
	nextMAC    uint16                        // the suffix takeMAC tries first
	reportFile atomic.Pointer[string]        // read by the loop's goroutine
	// reportReq is the Report session <report> asks for when it names no file (Genode's
	// way: the report goes to whoever serves Report, report_rom say), 0 without; report is
	// that session while open, read by the loop's goroutine.
	reportReq uint64
	report    atomic.Pointer[component.Session]
}

// NewHandler starts the loop and announces both services.
func NewHandler(c *component.Component) (*Handler, error) {
	h := &Handler{c: c, attached: map[uint64]*Attachment{}, nicClients: map[string]uint64{},
		clientOf: map[uint64]string{}, clientMAC: map[uint64]uint16{}, macInUse: map[uint16]bool{},
		sessions: map[uint64]*component.Session{}}
	h.reportFile.Store(new(string))
	var err error
	if h.loop, err = NewLoop(LoopOptions{Log: c.Log, Counter: c.Counter, Report: h.writeReport, State: c.StateRegion()}); err != nil {
		return nil, err
	}
	go h.loop.Run()
	c.Announce("Uplink")
	c.Announce("Nic")
	return h, nil
}

// Configure applies a new config, as the table's Parse (model.Parse) read it. It never fails:
// the router logs the config's problems and runs with what is valid (as Genode's does);
// `nicstack check` reports the same problems as the Parse's warnings.
func (h *Handler) Configure(typed any) error {
	cfg, err := component.ConfigOf[*model.Config](typed)
	if err != nil {
		return err
	}
	var file string
	if cfg.Report != nil {
		file = cfg.Report.File
	}
	h.reportFile.Store(&file)
	switch session := cfg.Report != nil && file == ""; {
	case session && h.reportReq == 0:
		h.reportReq = h.c.RequestContent("Report", "state")
	case !session && h.reportReq != 0:
		h.c.Release(h.reportReq)
		h.reportReq = 0
		h.report.Store(nil)
	}
	h.loop.Configure(cfg)
	want := map[string]bool{}
	for _, nc := range h.loop.NicClients() {
		want[nc.Label] = true
		if _, ok := h.nicClients[nc.Label]; !ok {
			mac, ok := h.takeMAC()
			if !ok {
				h.c.Log.Warn("nic-client: every MAC of the router's is in use", "label", nc.Label)
				continue
			}
			id := h.c.Request("Nic", nc.Label, nil, packetstream.DefaultConfig(), packetstream.DefaultConfig())
			h.nicClients[nc.Label], h.clientOf[id], h.clientMAC[id] = id, nc.Label, mac
		}
	}
	for label, id := range h.nicClients {
		if !want[label] {
			h.c.Release(id)
			delete(h.nicClients, label)
			delete(h.clientOf, id)
			delete(h.macInUse, h.clientMAC[id])
			delete(h.clientMAC, id)
		}
	}
	return nil
}

func (h *Handler) writeReport(n *config.Node) {
	path := *h.reportFile.Load()
	if n == nil {
		return
	}
	if path == "" {
		if s := h.report.Load(); s != nil {
			h.c.Send(s, n.XML())
		}
		return
	}
	data := n.HID()
	if strings.HasSuffix(path, ".xml") {
		data = n.XML()
	}
	h.c.WriteFile(path, data)
}

func (h *Handler) Open(s *component.Session) error {
	var (
		kind     router.Kind
		mac      header.MAC
		label    = s.Label
		out, in  = (*packetstream.Source)(nil), (*packetstream.Sink)(nil)
		linkFunc func(bool)
	)
	switch {
	case s.Device():
		if s.Service != "Report" || s.Request != h.reportReq {
			return fmt.Errorf("session %d (%s) is none the router asked for", s.ID, s.Service)
		}
		h.report.Store(s)
		return nil
	case s.Client != nil:
		nc, ok := h.clientOf[s.Request]
		if !ok {
			return fmt.Errorf("session %d answers no <nic-client> request", s.ID)
		}
		kind, label, out, in = router.NicClient, nc, s.Client.TX, s.Client.RX
		mac = nicClientMAC(h.clientMAC[s.Request])
	case s.Service == "Uplink":
		hw, err := net.ParseMAC(s.Args["mac"])
		if err != nil || len(hw) != 6 {
			return fmt.Errorf("Uplink session %q: the driver's MAC (argument mac=%q) is missing or bad", s.Label, s.Args["mac"])
		}
		kind, mac, out, in = router.Uplink, header.MAC(hw), s.Server.RX, s.Server.TX
	default:
		kind, out, in = router.Nic, s.Server.RX, s.Server.TX
		reported := true // the supervisor shows a session's link up when it opens
		linkFunc = func(up bool) {
			if up != reported {
				reported = up
				h.c.ReportLink(s, up)
			}
		}
	}
	a, err := h.loop.Attach(label, kind, mac, out, in, linkFunc)
	if err != nil {
		return err
	}
	ifc := a.Interface()
	// The hops dropHops takes away again.
	h.c.Queue(component.Hop(label, "arp"), func() netdev.Depth { return ifc.Held(time.Now()) })
	h.c.Queue(component.Hop(label, "fq-codel"), func() netdev.Depth { return ifc.Queued(time.Now()) })
	h.attached[s.ID] = a
	h.sessions[s.ID] = s
	return nil
}

// nicClientMAC is the router's MAC on a <nic-client> session whose suffix takeMAC gave. Our
// sessions carry no MAC from the server, so the router's identity there is a locally
// administered address, 02:02:02:01:xx:yy, apart from its Nic clients' 02:02:02:02:xx:yy.
func nicClientMAC(suffix uint16) header.MAC {
	return header.MAC{2, 2, 2, 1, byte(suffix >> 8), byte(suffix)}
}

// takeMAC returns a MAC suffix that no live <nic-client> request has, or false when all 65535
// are in use. It goes round the suffixes, so that one just released is not at once reused
// (a peer may still have it in its ARP cache for the old session).
func (h *Handler) takeMAC() (uint16, bool) {
	if len(h.macInUse) >= 1<<16-1 {
		return 0, false
	}
	for h.nextMAC == 0 || h.macInUse[h.nextMAC] {
		h.nextMAC++
	}
	n := h.nextMAC
	h.macInUse[n] = true
	h.nextMAC++
	return n, true
}

// Link follows the link state a nic-client session's server reports: the interface exists
// while the link is up.
func (h *Handler) Link(s *component.Session, up bool) {
	a := h.attached[s.ID]
	switch {
	case !up && a != nil:
		h.detach(a)
		delete(h.attached, s.ID)
	case up && a == nil && h.sessions[s.ID] != nil:
		if err := h.Open(s); err != nil {
			h.c.Log.Warn("link up", "session", s.ID, "err", err)
		}
	}
}

func (h *Handler) Close(s *component.Session) {
	h.report.CompareAndSwap(s, nil)
	if a := h.attached[s.ID]; a != nil && s.ClientRestarts {
		h.loop.Orphan(a) // a crashed vm's guest keeps its connections through NAT
		h.dropHops(a)
	} else if a != nil {
		h.detach(a)
	}
	delete(h.attached, s.ID)
	delete(h.sessions, s.ID)
}

// detach takes a session's interface out of the loop, and its queue out of the status.
func (h *Handler) detach(a *Attachment) {
	h.loop.Detach(a)
	h.dropHops(a)
}

// dropHops takes away the queues Open named for a's interface.
func (h *Handler) dropHops(a *Attachment) {
	for _, hop := range []string{"arp", "fq-codel"} {
		h.c.Queue(component.Hop(a.Interface().Label(), hop), nil)
	}
}

// Stop ends the loop once every session is closed, and releases its waiter.
func (h *Handler) Stop() {
	h.loop.Stop()
	if err := h.loop.Close(); err != nil {
		h.c.Log.Warn("closing the loop's waiter", "err", err)
	}
}
