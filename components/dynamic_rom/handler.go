package main

import (
	"fmt"
	"time"

	"github.com/nicstack/nicstack/components/dynamic_rom/dynamicrom"
	"github.com/nicstack/nicstack/runtime/component"
)

// Handler is the dynamic_rom component: each ROM session runs its module's timeline on a
// goroutine of its own from the moment it opens, as Genode's runs one per session.
type Handler struct {
	c          *component.Component
	cfg        dynamicrom.Config
	configured bool
	sessions   map[uint64]chan struct{} // closed to end a session's timeline
}

// NewHandler returns the handler.
func NewHandler(c *component.Component) *Handler {
	return &Handler{c: c, sessions: map[uint64]chan struct{}{}}
}

// Configure takes the modules; sessions open already keep the timeline they run, as
// Genode's dynamic_rom reads its config once.
func (h *Handler) Configure(typed any) error {
	cfg, err := component.ConfigOf[dynamicrom.Config](typed)
	if err != nil {
		return err
	}
	h.cfg = cfg
	if !h.configured {
		h.configured = true
		h.c.Announce("ROM")
	}
	return nil
}

func (h *Handler) Open(s *component.Session) error {
	if s.Service != "ROM" || s.Role != component.Server {
		return fmt.Errorf("dynamic_rom serves ROM sessions only, not %s", s.Service)
	}
	rom := h.cfg.Lookup(s.Label)
	if rom == nil {
		h.c.Log.Error(fmt.Sprintf("ROM module lookup of '%s' failed", s.Label))
		return fmt.Errorf("no <rom name=%q>", s.Label)
	}
	done := make(chan struct{})
	h.sessions[s.ID] = done
	verbose := h.cfg.Verbose
	go func() {
		t := dynamicrom.NewTimeline(rom)
		change := func(content []byte) {
			if content == nil {
				h.c.SendEmpty(s)
			} else {
				h.c.Send(s, content)
			}
		}
		log := func(line string) {
			if verbose {
				h.c.Log.Info(line)
			}
		}
		for {
			sleep := time.NewTimer(t.Run(change, log))
			select {
			case <-done:
				sleep.Stop()
				return
			case <-sleep.C:
			}
		}
	}()
	return nil
}

func (h *Handler) Close(s *component.Session) {
	if done, ok := h.sessions[s.ID]; ok {
		close(done)
		delete(h.sessions, s.ID)
	}
}

func (h *Handler) Stop() {
	for id, done := range h.sessions {
		close(done)
		delete(h.sessions, id)
	}
}
