// ROM and Report sessions: text instead of frames. A ROM server (dynamic_rom, report_rom)
// sends its module's content, a Report client its reports; the supervisor hands it to the
// session's other side. A child without <config> whose "config" ROM its route sends to a
// child takes that ROM as its config, as Genode's init routes a child's config ROM: it starts
// once the first content is there and gets every change live.

package supervisor

import (
	"bytes"
	"context"
	"fmt"

	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/component"
)

// configRequestID is the request id of a child's config ROM, which the supervisor requests
// for it (a component's own ids start at 1).
const configRequestID = 0

// content takes what c sent on a ROM session it serves or a Report session it requested,
// and hands it to the session's other side (once that side has the session).
func (s *Supervisor) content(c *child, ct *controlpb.Content) {
	id := ct.GetSessionId()
	for _, r := range s.requests {
		if r.session != id || r.decision == nil || r.decision.Parent {
			continue
		}
		var to *child
		switch {
		case r.service == "ROM" && r.decision.Server == c.start.Name:
			if r.key.id == configRequestID {
				s.configContent(s.children[r.key.client], r, ct)
				return
			}
			to = s.children[r.key.client]
		case r.service == "Report" && r.key.client == c.start.Name:
			to = s.children[r.decision.Server]
		default:
			continue
		}
		r.content = ct
		if !r.opening {
			s.handContent(to, r)
		}
		return
	}
	s.log.Debug(fmt.Sprintf("%s sent content on session %d, which is no ROM it serves nor Report it requested; dropped", c.start.Name, id))
}

// handContent queues handing to the content r's other side sent last.
func (s *Supervisor) handContent(to *child, r *request) {
	if to == nil || to.proc == nil || to.state != Running || r.content == nil {
		return
	}
	req := &controlpb.ContentRequest{SessionId: r.session, Data: r.content.GetData(), Empty: r.content.GetEmpty()}
	s.tell(to, fmt.Sprintf("Content of session %d", r.session), func(ctx context.Context, ctl controlpb.ComponentClient) error {
		_, err := ctl.Content(ctx, req)
		return err
	})
}

// configROM is c's config ROM request when c takes its config from a child's ROM (it has no
// <config>, and its route sends ROM "config" to a child), made and opened on first use; nil
// otherwise, when c's config is its <config> (or none).
func (s *Supervisor) configROM(c *child) *request {
	d := s.sc.ConfigROM(c.start)
	if d == nil {
		return nil
	}
	key := reqKey{c.start.Name, configRequestID}
	r := s.requests[key]
	if r == nil {
		r = &request{key: key, service: "ROM", label: "config", device: &component.DeviceSpec{}, decision: d}
		s.requests[key] = r
		s.log.Debug(fmt.Sprintf("%s takes its config from ROM %q of %s", c.start.Name, d.Label, d.Server))
		s.open(r)
	}
	return r
}

// ConfigROM is where st's config ROM is routed when st takes its config from a child's ROM
// (it has no <config>, and its route sends ROM "config" to a child); nil otherwise.
func (sc *Scenario) ConfigROM(st *Start) *Decision {
	if st.Config != nil {
		return nil
	}
	d, err := sc.Resolve(st, "ROM", "config")
	if err != nil || d.Parent {
		return nil
	}
	return d
}

// configContent takes what c's config ROM now holds as c's config: c starts with the first,
// and gets each change. A removed module leaves c with the config it has.
func (s *Supervisor) configContent(c *child, r *request, ct *controlpb.Content) {
	if c == nil {
		return
	}
	if ct.GetEmpty() {
		s.log.Warn(fmt.Sprintf("%s: its config ROM %q of %s was removed; it keeps its config", c.start.Name, r.decision.Label, r.decision.Server))
		return
	}
	if bytes.Equal(ct.GetData(), c.romConfig) {
		return
	}
	c.romConfig = ct.GetData()
	switch {
	case c.waitsForConfig:
		c.waitsForConfig = false
		s.launch(c)
	case c.state == Running && c.proc != nil:
		s.updateConfig(c, s.romConfigText(c))
	}
	// A child being launched gets it right after (launched compares).
}

// romConfigText is c's config from its config ROM, its errors naming the ROM.
func (s *Supervisor) romConfigText(c *child) *controlpb.Config {
	r := s.requests[reqKey{c.start.Name, configRequestID}]
	origin := "config ROM"
	if r != nil {
		origin = fmt.Sprintf("ROM %q of %s", r.decision.Label, r.decision.Server)
	}
	return &controlpb.Config{Text: string(c.romConfig), Origin: origin}
}
