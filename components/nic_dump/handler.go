package main

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/components/nic_dump/nicdump"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/pcap"
)

// Handler is the nic_dump component. As Genode's, it serves a single client: the session it
// serves is the downlink, and for it nic_dump requests a Nic session of the same stream sizes
// upward, the uplink, released when the downlink closes. The downlink's link is up exactly
// while the uplink is open and its server reports it up.
type Handler struct {
	c          *component.Component
	log        io.Writer // where the packet log goes: the process's stderr, which the supervisor prefixes
	cfg        nicdump.Config
	configured bool
	timing     *header.Timing // since the component started, over every wire

	down, up *component.Session // nil while not open
	upReq    uint64             // the uplink's request, 0 while there is no downlink
	upLink   bool               // the link state the uplink's server reports
	wire     *wire              // the running wire, nil while no session is open

	capture                    io.Writer  // the pcap file, nil without pcap=
	files                      fileWriter // the supervisor (the component), or a test's
	toUplink, toDownlink, errs *atomic.Uint64
}

// NewHandler returns the handler; it logs frames to log.
func NewHandler(c *component.Component, log io.Writer) *Handler {
	return &Handler{c: c, files: c, log: log, timing: header.NewTiming(time.Now()),
		toUplink: c.Counter("uplink_dropped"), toDownlink: c.Counter("downlink_dropped"), errs: c.Counter("write_errors")}
}

// Configure applies a config, also a changed one: the wire restarts with the new styles and
// labels, and a changed pcap path starts a new capture file.
func (h *Handler) Configure(typed any) error {
	cfg, err := component.ConfigOf[nicdump.Config](typed)
	if err != nil {
		return err
	}
	first := !h.configured
	if cfg.Pcap != h.cfg.Pcap || first {
		if err := h.openCapture(cfg.Pcap); err != nil {
			return err
		}
	}
	h.cfg, h.configured = cfg, true
	if first {
		h.c.Announce("Nic")
	}
	return h.rewire()
}

// openCapture starts a new capture file at path ("": none). The supervisor writes it: a
// confined component opens no files (the table's Files names the pcap path it may write).
func (h *Handler) openCapture(path string) error {
	h.endWire() // the wire may be writing to the old file
	h.capture = nil
	if path != "" {
		h.files.WriteFile(path, pcap.AppendFileHeader(nil, pcap.Snaplen))
		h.capture = captureFile{h.files, path}
	}
	return nil
}

// fileWriter writes the files the config names: component.Component has the supervisor do it.
type fileWriter interface {
	WriteFile(path string, data []byte)
	AppendFile(path string, data []byte)
}

// captureFile adds a batch's pcap records to the capture file.
type captureFile struct {
	files fileWriter
	path  string
}

func (f captureFile) Write(b []byte) (int, error) {
	f.files.AppendFile(f.path, b)
	return len(b), nil
}

func (h *Handler) Open(s *component.Session) error {
	switch {
	case s.Server != nil:
		if h.down != nil {
			return fmt.Errorf("nic_dump serves one client, and %q has the session", h.down.Label)
		}
		h.down = s
		h.upReq = h.c.Request("Nic", "", nil, s.Server.TX.Config(), s.Server.RX.Config())
		h.c.ReportLink(s, false) // until the uplink is up
	case s.Client != nil && s.Request == h.upReq && h.upReq != 0:
		h.up, h.upLink = s, true
		h.c.ReportLink(h.down, true)
	default:
		return fmt.Errorf("session %d (%s %q) is neither the downlink nor the uplink's", s.ID, s.Service, s.Label)
	}
	return h.rewire()
}

func (h *Handler) Close(s *component.Session) {
	switch s {
	case h.down:
		h.c.Release(h.upReq)
		h.down, h.upReq = nil, 0
	case h.up:
		h.up = nil
		if h.down != nil {
			h.c.ReportLink(h.down, false)
		}
	default:
		return
	}
	if err := h.rewire(); err != nil {
		h.c.Log.Error("restarting the wire", "err", err)
	}
}

// Link passes the link state of the uplink's server on to the client.
func (h *Handler) Link(s *component.Session, up bool) {
	if s == h.up && up != h.upLink {
		h.upLink = up
		if h.down != nil {
			h.c.ReportLink(h.down, up)
		}
	}
}

// Denied logs that the uplink will not come; the client keeps its session, link down.
func (h *Handler) Denied(_ uint64, reason string) {
	h.c.Log.Error("no uplink: the Nic session nic_dump requested was denied", "reason", reason)
}

// Stop ends the wire (the capture file holds what it wrote).
func (h *Handler) Stop() {
	h.endWire()
	h.capture = nil
}

// rewire restarts the wire over the sessions open now.
func (h *Handler) rewire() error {
	h.endWire()
	if h.down == nil && h.up == nil {
		return nil
	}
	w := &wire{
		down:    side{name: h.cfg.Downlink, dropped: h.toDownlink},
		up:      side{name: h.cfg.Uplink, dropped: h.toUplink},
		cfg:     h.cfg.Log,
		log:     h.log,
		onError: h.writeFailed,
	}
	if h.down != nil {
		w.down.in, w.down.out = h.down.Server.TX, h.down.Server.RX
	}
	if h.up != nil {
		w.up.in, w.up.out = h.up.Client.RX, h.up.Client.TX
	}
	if h.cfg.Time {
		w.timing = h.timing
	}
	if h.capture != nil {
		w.capture = h.capture
	}
	if err := w.start(); err != nil {
		return err
	}
	h.wire = w
	return nil
}

func (h *Handler) endWire() {
	if h.wire != nil {
		h.wire.end()
		h.wire = nil
	}
}

// writeFailed runs on the wire's goroutine.
func (h *Handler) writeFailed(what string, err error) {
	h.errs.Add(1)
	h.c.Log.Error("writing the "+what+" failed; nic_dump stops writing it", "err", err)
}
