// Reload: a changed scenario file restarts the children whose start changed (or whose version
// did) and re-delivers changed configs to the others. As in Genode's init, an exited child
// starts again only with a new version, and one that could not be launched is tried again.

package supervisor

import (
	"bytes"
	"context"
	"fmt"

	controlpb "github.com/nicstack/nicstack/proto"
)

// reload reads the changed scenario file and applies it with the attachments. An attachment
// whose name the file now has gives way to the file's start.
func (s *Supervisor) reload() {
	file, err := LoadScenario(s.path)
	if err != nil {
		s.log.Error("scenario changed but is broken; keeping the running one: " + err.Error())
		return
	}
	kept := s.attached[:0:0]
	for _, a := range s.attached {
		if file.Start(a.Name) != nil || file.Alias(a.Name) != nil {
			s.log.Warn(fmt.Sprintf("%s detached: the scenario file has a <start> of that name now", a.Name))
			continue
		}
		kept = append(kept, a)
	}
	prevFile := s.file
	s.file = file.Root
	sc, err := s.compose(kept)
	if err != nil {
		s.file = prevFile
		s.log.Error("scenario changed but does not go with the attachments; keeping the running one: " + err.Error())
		return
	}
	if len(kept) != len(s.attached) {
		s.attached = kept
		if err := s.saveAttachments(); err != nil {
			s.log.Error(err.Error())
		}
	}
	s.warnUnknown(file)
	s.checkConfigs(sc, nil)
	s.apply(sc)
}

// apply makes sc the running scenario: new starts start, removed ones stop, a start whose
// launch parameters (version, binary, ram, affinity, provides, routes) changed restarts, and a
// start whose <config> alone changed gets it live.
func (s *Supervisor) apply(sc *Scenario) {
	old := s.sc
	s.sc = sc
	for name, c := range s.children {
		if sc.Start(name) == nil {
			s.log.Info(fmt.Sprintf("%s removed from the scenario; stopping it", name))
			s.stop(c)
			delete(s.children, name)
			s.closeSocketsOf(name)
		}
	}
	for _, st := range sc.Starts {
		c := s.children[st.Name]
		if c == nil {
			c = s.newChild(st)
			s.children[st.Name] = c
			s.launch(c)
			continue
		}
		prev := c.start
		c.start = st
		switch {
		case c.state == Exited:
			if prev.Version != st.Version {
				s.log.Info(fmt.Sprintf("%s: version %q -> %q; starting it again", st.Name, prev.Version, st.Version))
				c.backoff = s.opts.MinBackoff
				c.discardRegion()
				s.launch(c)
			}
		case c.state == Failed:
			s.log.Info(fmt.Sprintf("%s: the scenario changed; trying to start it again", st.Name))
			c.backoff = s.opts.MinBackoff
			s.launch(c)
		case launchKey(old, prev) != launchKey(sc, st):
			if prev.Version != st.Version {
				s.log.Info(fmt.Sprintf("%s: version %q -> %q; restarting it", st.Name, prev.Version, st.Version))
			} else {
				s.log.Info(fmt.Sprintf("%s: <start> changed; restarting it", st.Name))
			}
			s.stop(c)
			c.backoff = s.opts.MinBackoff
			s.launch(c)
		case !sameConfig(prev, st) && c.proc != nil && c.state == Running:
			s.updateConfig(c, configText(sc, st))
		}
	}
	// Routes may have changed for requests that were waiting.
	for _, r := range s.requests {
		if r.session == 0 && r.decision != nil {
			if cl := s.children[r.key.client]; cl != nil {
				if d, err := sc.Resolve(cl.start, r.service, r.label); err == nil && !d.Parent {
					r.decision = d
				}
			}
		}
	}
	s.openWaiting()
}

// updateConfig queues handing c's process its changed config.
func (s *Supervisor) updateConfig(c *child, cfg *controlpb.Config) {
	p, name := c.proc, c.start.Name
	p.calls.Push(call{
		what: "UpdateConfig",
		do: func(ctx context.Context) error {
			_, err := p.ctl.UpdateConfig(ctx, cfg)
			return err
		},
		done: func(err error) {
			switch {
			case c.proc != p: // ended meanwhile; a new process starts with the scenario's config
			case err != nil:
				s.log.Error(fmt.Sprintf("%s rejected its new config (keeps the old one): %v", name, err))
			default:
				s.log.Info(fmt.Sprintf("%s: config updated", name))
			}
		},
	})
}

// launchKey is everything about a start whose change needs a restart.
func launchKey(sc *Scenario, st *Start) string {
	n := *st.Node
	n.Nodes = nil
	for _, c := range st.Node.Nodes {
		if c.Type != "config" {
			n.Nodes = append(n.Nodes, c)
		}
	}
	key := string(n.XML()) + fmt.Sprintf("|space %v|heartbeat %d", sc.Space, sc.HeartbeatMS)
	if st.Route == nil && sc.DefaultRoute != nil {
		if dr := sc.Root.Sub("default-route"); dr != nil {
			key += string(dr.XML())
		}
	}
	return key + fmt.Sprint(sc.ParentProvides)
}

func sameConfig(a, b *Start) bool {
	switch {
	case a.Config == nil || b.Config == nil:
		return a.Config == nil && b.Config == nil
	}
	return bytes.Equal(a.Config.XML(), b.Config.XML())
}
