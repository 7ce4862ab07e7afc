package main

import (
	"fmt"
	"strings"

	"github.com/nicstack/nicstack/components/report_rom/reportrom"
	"github.com/nicstack/nicstack/runtime/component"
)

// Handler is the report_rom component.
type Handler struct {
	c          *component.Component
	cfg        reportrom.Config
	configured bool
	reports    map[string][]byte             // the last report, by its session's label
	roms       map[*component.Session]string // open ROM sessions and the report each reads
}

// NewHandler returns the handler.
func NewHandler(c *component.Component) *Handler {
	return &Handler{c: c, reports: map[string][]byte{}, roms: map[*component.Session]string{}}
}

// Configure takes the policies; a ROM session open already reads what it read.
func (h *Handler) Configure(typed any) error {
	cfg, err := component.ConfigOf[reportrom.Config](typed)
	if err != nil {
		return err
	}
	h.cfg = cfg
	if !h.configured {
		h.configured = true
		h.c.Announce("Report")
		h.c.Announce("ROM")
	}
	return nil
}

func (h *Handler) Open(s *component.Session) error {
	switch {
	case s.Role != component.Server:
		return fmt.Errorf("report_rom requests no sessions")
	case s.Service == "Report":
		return nil
	case s.Service == "ROM":
		report, ok := h.cfg.Report(s.Label)
		if !ok {
			return fmt.Errorf("no policy for ROM %q", s.Label)
		}
		h.roms[s] = report
		if data, ok := h.reports[report]; ok {
			h.c.Send(s, data)
		}
		return nil
	}
	return fmt.Errorf("report_rom serves Report and ROM sessions, not %s", s.Service)
}

// Content takes a report and hands it to every ROM session that reads it.
func (h *Handler) Content(s *component.Session, data []byte, _ bool) {
	if s.Service != "Report" {
		return
	}
	h.reports[s.Label] = data
	if h.cfg.Verbose {
		h.c.Log.Info(fmt.Sprintf("report '%s'", s.Label))
		h.c.Log.Info(strings.TrimRight(string(data), "\n"))
	}
	for rom, report := range h.roms {
		if report == s.Label {
			h.c.Send(rom, data)
		}
	}
}

// Close of a Report session clears its report, as Genode's does: its readers see the
// module removed.
func (h *Handler) Close(s *component.Session) {
	delete(h.roms, s)
	if s.Service != "Report" {
		return
	}
	delete(h.reports, s.Label)
	for rom, report := range h.roms {
		if report == s.Label {
			h.c.SendEmpty(rom)
		}
	}
}

func (h *Handler) Stop() {}
