package port

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/nicstack/nicstack/router"
	"github.com/nicstack/nicstack/router/header"
	"github.com/nicstack/nicstack/router/model"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Schema is the nic_router config of router/model with nicstack's one addition: <report
// file="PATH"/> names the file the state report is written to (the supervisor has no Report
// service to route it to). A path ending in .xml gets XML, any other HID.
func Schema() *config.Schema {
	s := model.Schema()
	for _, n := range s.Nodes {
		if n.Type == "report" {
			n.Attrs = append(n.Attrs, "file")
		}
	}
	return s
}

// Handler is the nic_router component: it serves Uplink and Nic sessions, opens the
// <nic-client> sessions of its config, and runs one Loop over all of them.
type Handler struct {
	c          *component.Component
	loop       *Loop
	attached   map[uint64]*Attachment // by session id
	nicClients map[string]uint64      // <nic-client> label -> request id
	clientOf   map[uint64]string      // request id -> <nic-client> label
	reportFile atomic.Pointer[string] // read by the loop's goroutine
	sessions   map[uint64]*component.Session
}

// NewHandler starts the loop and announces both services.
func NewHandler(c *component.Component) (*Handler, error) {
	h := &Handler{c: c, attached: map[uint64]*Attachment{}, nicClients: map[string]uint64{},
		clientOf: map[uint64]string{}, sessions: map[uint64]*component.Session{}}
	h.reportFile.Store(new(string))
	var err error
	if h.loop, err = NewLoop(Options{Log: c.Log, Counter: c.Counter, Report: h.writeReport}); err != nil {
		return nil, err
	}
	go h.loop.Run()
	c.Announce("Uplink")
	c.Announce("Nic")
	return h, nil
}

// Configure applies a new config; its problems are logged and the router runs with what is
// valid (as Genode's does), so it never fails.
func (h *Handler) Configure(n *config.Node) error {
	file, stripped := reportFile(n)
	h.reportFile.Store(&file)
	h.loop.Configure(stripped)
	want := map[string]bool{}
	for _, nc := range h.loop.NicClients() {
		want[nc.Label] = true
		if _, ok := h.nicClients[nc.Label]; !ok {
			id := h.c.Request("Nic", nc.Label, nil, packetstream.DefaultConfig(), packetstream.DefaultConfig())
			h.nicClients[nc.Label], h.clientOf[id] = id, nc.Label
		}
	}
	for label, id := range h.nicClients {
		if !want[label] {
			h.c.Release(id)
			delete(h.nicClients, label)
			delete(h.clientOf, id)
		}
	}
	return nil
}

// reportFile takes <report file> out of the config handed to the router.
func reportFile(n *config.Node) (string, *config.Node) {
	rep := n.Sub("report")
	if rep == nil || !rep.Has("file") {
		return "", n
	}
	file := rep.String("file", "")
	cp := *n
	cp.Nodes = make([]*config.Node, len(n.Nodes))
	for k, sub := range n.Nodes {
		if sub == rep {
			r := *rep
			r.Attrs = nil
			for _, a := range rep.Attrs {
				if a.Name != "file" {
					r.Attrs = append(r.Attrs, a)
				}
			}
			sub = &r
		}
		cp.Nodes[k] = sub
	}
	return file, &cp
}

func (h *Handler) writeReport(n *config.Node) {
	path := *h.reportFile.Load()
	if path == "" || n == nil {
		return
	}
	data := n.HID()
	if strings.HasSuffix(path, ".xml") {
		data = n.XML()
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	err := os.WriteFile(tmp, data, 0o644)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		h.c.Log.Warn("state report", "file", path, "err", err)
	}
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
	case s.Client != nil:
		nc, ok := h.clientOf[s.Request]
		if !ok {
			return fmt.Errorf("session %d answers no <nic-client> request", s.ID)
		}
		kind, label, out, in = router.NicClient, nc, s.Client.TX, s.Client.RX
		// Our sessions carry no MAC from the server: the router's identity on a nic-client
		// session is a local address made from the request id.
		mac = header.MAC{2, 2, 2, 2, 1, byte(s.Request)}
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
	h.attached[s.ID] = a
	h.sessions[s.ID] = s
	return nil
}

// Link follows the link state a nic-client session's server reports: the interface exists
// while the link is up.
func (h *Handler) Link(s *component.Session, up bool) {
	a := h.attached[s.ID]
	switch {
	case !up && a != nil:
		h.loop.Detach(a)
		delete(h.attached, s.ID)
	case up && a == nil && h.sessions[s.ID] != nil:
		if err := h.Open(s); err != nil {
			h.c.Log.Warn("link up", "session", s.ID, "err", err)
		}
	}
}

func (h *Handler) Close(s *component.Session) {
	if a := h.attached[s.ID]; a != nil {
		h.loop.Detach(a)
	}
	delete(h.attached, s.ID)
	delete(h.sessions, s.ID)
}
