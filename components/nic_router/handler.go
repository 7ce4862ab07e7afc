package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/nicstack/nicstack/router"
	"github.com/nicstack/nicstack/router/header"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Handler is the nic_router component: it serves Uplink and Nic sessions, opens the
// <nic-client> sessions of its config, and runs one Loop over all of them.
type Handler struct {
	c          *component.Component
	loop       *Loop
	attached   map[uint64]*Attachment // by session id
	nicClients map[string]uint64      // <nic-client> label -> request id
	clientOf   map[uint64]string      // request id -> <nic-client> label
	clientMAC  map[uint64]header.MAC  // request id -> the router's MAC on that session
	macInUse   map[uint16]bool        // the suffixes of clientMAC's values
	nextMAC    uint16
	reportFile atomic.Pointer[string] // read by the loop's goroutine
	sessions   map[uint64]*component.Session
}

// NewHandler starts the loop and announces both services.
func NewHandler(c *component.Component) (*Handler, error) {
	h := &Handler{c: c, attached: map[uint64]*Attachment{}, nicClients: map[string]uint64{},
		clientOf: map[uint64]string{}, clientMAC: map[uint64]header.MAC{}, macInUse: map[uint16]bool{},
		sessions: map[uint64]*component.Session{}}
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
	file := ""
	if rep := n.Sub("report"); rep != nil {
		file = rep.String("file", "")
	}
	h.reportFile.Store(&file)
	h.loop.Configure(n)
	want := map[string]bool{}
	for _, nc := range h.loop.NicClients() {
		want[nc.Label] = true
		if _, ok := h.nicClients[nc.Label]; !ok {
			id := h.c.Request("Nic", nc.Label, nil, packetstream.DefaultConfig(), packetstream.DefaultConfig())
			h.nicClients[nc.Label], h.clientOf[id], h.clientMAC[id] = id, nc.Label, h.takeMAC()
		}
	}
	for label, id := range h.nicClients {
		if !want[label] {
			h.c.Release(id)
			delete(h.nicClients, label)
			delete(h.clientOf, id)
			mac := h.clientMAC[id]
			delete(h.macInUse, uint16(mac[4])<<8|uint16(mac[5]))
			delete(h.clientMAC, id)
		}
	}
	return nil
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
		mac = h.clientMAC[s.Request]
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

// takeMAC returns the router's MAC for a new <nic-client> session. Our sessions carry no MAC
// from the server, so the router's identity there is a locally administered address,
// 02:02:02:01:xx:yy, unique among the nic-client sessions that live at one time (65535 of them).
func (h *Handler) takeMAC() header.MAC {
	for h.macInUse[h.nextMAC] || h.nextMAC == 0 {
		h.nextMAC++
	}
	n := h.nextMAC
	h.macInUse[n] = true
	h.nextMAC++
	return header.MAC{2, 2, 2, 1, byte(n >> 8), byte(n)}
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

// Stop ends the loop once every session is closed, and releases its waiter.
func (h *Handler) Stop() {
	h.loop.Stop()
	if err := h.loop.Close(); err != nil {
		h.c.Log.Warn("closing the loop's waiter", "err", err)
	}
}
