// Sessions: a client's request is routed by the scenario, opened at the server (or at the
// parent service) once it is there, handed to the client, and closed when either side goes.

package supervisor

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// reqKey names a request: its client and the id the client gave it.
type reqKey struct {
	client string
	id     uint64
}

// request is a session a client asked for; it outlives the server's restarts. While open,
// session is the id both sides know it by (a new one per opening).
type request struct {
	key       reqKey
	service   string
	label     string
	args      map[string]string
	tx, rx    packetstream.Config
	device    *component.DeviceSpec // set for a device session (tx and rx unused)
	parent    *parentSession        // what the supervisor made for an open parent-service session
	decision  *Decision
	denied    string
	session   uint64
	openedAt  time.Time
	linkUp    bool
	ram       int
	waitNoted bool
	// content is what a ROM session's server or a Report session's client sent last, for the
	// other side once it has the session.
	content *controlpb.Content
	// opening: the session is being made, by the supervisor for a parent service (session
	// still 0) or at the server; the client is handed it once that is done.
	opening bool
}

// event handles what c's process reports: a service it announced, a session it requests or
// releases, the link state of a session it serves, a file it has the supervisor write.
func (s *Supervisor) event(c *child, ev *controlpb.Event) {
	switch k := ev.Kind.(type) {
	case *controlpb.Event_Announce:
		svc := k.Announce.GetService()
		if !contains(c.start.Provides, svc) {
			// Genode's init says exactly this, and ignores the announcement.
			s.log.Error(fmt.Sprintf("%s: illegal announcement of service \"%s\"", c.start.Name, svc))
			return
		}
		c.announced[svc] = true
		s.log.Debug(fmt.Sprintf("%s announced %s", c.start.Name, svc))
		s.openWaiting()
	case *controlpb.Event_Request:
		s.request(c, k.Request)
	case *controlpb.Event_Release:
		key := reqKey{c.start.Name, k.Release.GetRequestId()}
		if r, ok := s.requests[key]; ok {
			s.closeSession(r, "released by "+c.start.Name, true)
			delete(s.requests, key)
		}
	case *controlpb.Event_Content:
		s.content(c, k.Content)
	case *controlpb.Event_WriteFile:
		s.writeFile(c, k.WriteFile.GetPath(), k.WriteFile.GetData(), k.WriteFile.GetAppend())
	case *controlpb.Event_LinkState:
		for _, r := range s.requests {
			if r.session == k.LinkState.GetSessionId() && r.decision != nil && r.decision.Server == c.start.Name {
				r.linkUp = k.LinkState.GetUp()
				// While the server's OpenSession is answered, the client has not been handed
				// the session yet; it learns the link state right after (serverOpened).
				if !r.opening {
					s.linkState(r)
				}
			}
		}
	}
}

// linkState tells r's client the link state of its open session.
func (s *Supervisor) linkState(r *request) {
	cl := s.children[r.key.client]
	if cl == nil || cl.proc == nil {
		return
	}
	id, up := r.session, r.linkUp
	s.tell(cl, fmt.Sprintf("LinkState of session %d", id), func(ctx context.Context, ctl controlpb.ComponentClient) error {
		_, err := ctl.LinkState(ctx, &controlpb.LinkStateRequest{SessionId: id, Up: up})
		return err
	})
}

// tell queues a call at c's process whose answer needs no more than a log line when it
// fails (and the process is still c's: an ended one's calls fail by design).
func (s *Supervisor) tell(c *child, what string, do func(context.Context, controlpb.ComponentClient) error) {
	p := c.proc
	p.calls.Push(call{
		what: what,
		do:   func(ctx context.Context) error { return do(ctx, p.ctl) },
		done: func(err error) {
			if err != nil && c.proc == p {
				s.log.Debug(fmt.Sprintf("%s at %s: %v", what, c.start.Name, err))
			}
		},
	})
}

// request routes a new session request and opens it when its server is ready.
func (s *Supervisor) request(c *child, req *controlpb.SessionRequest) {
	r := &request{
		key: reqKey{c.start.Name, req.GetRequestId()}, service: req.GetService(), label: req.GetLabel(),
		args: req.GetArgs(), tx: component.StreamConfig(req.GetTx()), rx: component.StreamConfig(req.GetRx()),
	}
	if _, dup := s.requests[r.key]; dup {
		s.log.Error(fmt.Sprintf("%s requested a session with id %d twice; the second request is ignored", c.start.Name, r.key.id))
		return
	}
	s.requests[r.key] = r
	if d := req.GetDevice(); d != nil {
		spec := component.DeviceSpecFrom(d)
		r.device = &spec
		if err := checkDeviceSpec(spec); err != nil {
			s.deny(r, err.Error())
			return
		}
	} else {
		for _, cfg := range []packetstream.Config{r.tx, r.rx} {
			if err := cfg.Validate(); err != nil {
				s.deny(r, fmt.Sprintf("session sizes: %v", err))
				return
			}
		}
	}
	d, err := s.sc.Resolve(c.start, r.service, r.label)
	if err != nil {
		s.deny(r, err.Error())
		return
	}
	if _, ok := s.opts.ParentServices[r.service]; d.Parent && !ok {
		s.deny(r, noParentService(r.service, s.opts.ParentServices).Error())
		return
	}
	r.decision = d
	for _, line := range d.Trace {
		s.log.Debug("route " + line)
	}
	s.log.Debug(fmt.Sprintf("session %s %q of %s routed to %s as %q", r.service, r.label, c.start.Name, serverName(d), d.Label))
	s.open(r)
}

// deny refuses r for good and tells its client why.
func (s *Supervisor) deny(r *request, reason string) {
	r.denied, r.decision = reason, nil
	s.log.Error(fmt.Sprintf("session %s %q of %s denied: %s", r.service, r.label, r.key.client, reason))
	if cl := s.children[r.key.client]; cl != nil && cl.proc != nil {
		// In the background: a denial concerns no session, so its order among the other calls
		// does not matter, and a hung client must not hold up the loop.
		ctl, client, req := cl.proc.ctl, r.key.client, &controlpb.DeniedRequest{RequestId: r.key.id, Reason: reason}
		s.ending.Add(1)
		go func() {
			defer s.ending.Done()
			ctx, cancel := s.ctx()
			defer cancel()
			if _, err := ctl.Denied(ctx, req); err != nil {
				s.log.Debug(fmt.Sprintf("telling %s of the denial: %v", client, err))
			}
		}()
	}
}

func serverName(d *Decision) string {
	if d.Parent {
		return "the parent"
	}
	return d.Server
}

// openWaiting opens every routed request whose server has become ready.
func (s *Supervisor) openWaiting() {
	keys := make([]reqKey, 0, len(s.requests))
	for k := range s.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].client != keys[j].client {
			return keys[i].client < keys[j].client
		}
		return keys[i].id < keys[j].id
	})
	for _, k := range keys {
		if r := s.requests[k]; r.session == 0 && r.decision != nil {
			s.open(r)
		}
	}
}

// open hands both sides the session's files and opens it at the server, then the client.
func (s *Supervisor) open(r *request) {
	cl, srv := s.children[r.key.client], s.children[r.decision.Server]
	// A config ROM opens before its client runs: the client starts with its content.
	if cl == nil || cl.state != Running && r.key.id != configRequestID {
		return
	}
	if r.decision.Parent {
		s.openAtParent(r)
		return
	}
	if srv == nil || srv.state != Running || !srv.announced[r.service] {
		if !r.waitNoted {
			s.log.Debug(fmt.Sprintf("session %s %q of %s waits for %s to announce %s", r.service, r.label, r.key.client, r.decision.Server, r.service))
			r.waitNoted = true
		}
		return
	}
	need, what := r.tx.RegionSize()+r.rx.RegionSize(), fmt.Sprintf("session buffers (tx %d + rx %d)", r.tx.RegionSize(), r.rx.RegionSize())
	if r.device != nil {
		need, what = deviceRAM(*r.device), fmt.Sprintf("device memory (%d regions)", len(r.device.Mems))
	}
	if q := cl.start.RAM; q != 0 && uint64(cl.ramUsed+need) > q {
		s.deny(r, fmt.Sprintf("%s: session %s %q needs %d bytes of %s, but ram=%d of %q has %d left; raise its ram",
			cl.start.Node.Pos, r.service, r.label, need, what, q, r.key.client, int(q)-cl.ramUsed))
		return
	}
	s.nextID++
	id := s.nextID
	r.openedAt = time.Now()
	files, err := s.sessionFiles(r, fmt.Sprintf("%s->%s#%d", r.key.client, srv.start.Name, id))
	if err != nil {
		s.log.Error(fmt.Sprintf("session %s of %s: %v", r.service, r.key.client, err))
		return
	}
	req := &controlpb.OpenSessionRequest{
		SessionId: id, RequestId: r.key.id, Role: controlpb.Role_SERVER, Service: r.service, Label: r.decision.Label, Args: r.args,
		Files: uint32(len(files)),
	}
	if r.device != nil {
		req.Device = component.DeviceSpecProto(*r.device)
	} else {
		txBytes, rxBytes := QueueBounds(r.decision.Target, r.tx)
		req.Tx = &controlpb.StreamSize{QueueSize: uint32(r.tx.QueueSize), BulkSize: uint32(r.tx.BulkSize), QueueBytes: uint32(txBytes)}
		req.Rx = &controlpb.StreamSize{QueueSize: uint32(r.rx.QueueSize), BulkSize: uint32(r.rx.BulkSize), QueueBytes: uint32(rxBytes)}
	}
	// The session counts as open from here (its ram charged, its id known), so that closing it
	// meanwhile queues the server's CloseSession behind its OpenSession.
	r.session, r.opening, r.linkUp, r.ram, r.waitNoted = id, true, true, need, false
	cl.ramUsed += need
	s.hand(srv.proc, req, files, func(err error) { s.serverOpened(r, srv, req, files, err) })
}

// serverOpened follows the server's answer to r's OpenSession: on success the client is
// handed the session (files and all), then told the link state if the server reported it
// down meanwhile.
func (s *Supervisor) serverOpened(r *request, srv *child, req *controlpb.OpenSessionRequest, files []*os.File, err error) {
	id := req.SessionId
	if r.session != id {
		closeFiles(files) // closed meanwhile: the server's CloseSession is queued behind
		return
	}
	// Both processes are still the ones the session was opened with: an exit or stop of
	// either would have closed it.
	r.opening = false
	cl := s.children[r.key.client]
	if err != nil {
		closeFiles(files)
		s.log.Error(fmt.Sprintf("session %s %q of %s: server %s refused: %v", r.service, r.label, r.key.client, srv.start.Name, err))
		cl.ramUsed -= r.ram
		r.session, r.linkUp, r.ram = 0, false, 0
		return
	}
	if r.key.id == configRequestID {
		closeFiles(files) // the supervisor is this ROM's client
		return
	}
	creq := proto.Clone(req).(*controlpb.OpenSessionRequest)
	creq.Role = controlpb.Role_CLIENT
	s.hand(cl.proc, creq, files, func(err error) {
		closeFiles(files) // both sides hold their own copies once sent
		s.clientOpened(r, id, srv.start.Name, err)
	})
	if !r.linkUp {
		s.linkState(r)
	}
	s.handContent(cl, r) // what the server sent meanwhile, right behind the session
}

// clientOpened follows the client's answer to its OpenSession of session id of r.
func (s *Supervisor) clientOpened(r *request, id uint64, server string, err error) {
	if r.session != id {
		return // closed meanwhile
	}
	if err != nil {
		s.log.Error(fmt.Sprintf("session %s %q of %s: client refused: %v", r.service, r.label, r.key.client, err))
		s.children[r.key.client].ramUsed -= r.ram
		r.session, r.linkUp, r.ram = 0, false, 0
		if r.parent != nil {
			s.closeParent(r.parent)
			r.parent = nil
		} else {
			s.closeAt(s.children[server], id, "client refused the session")
		}
		return
	}
	where := server
	if r.parent != nil && r.parent.ns != nil {
		where = fmt.Sprintf("the parent: %s in namespace %s", r.parent.iface, r.parent.ns.Name)
	} else if r.parent != nil {
		where = "the parent"
	}
	s.log.Debug(fmt.Sprintf("session %d %s %q of %s opened at %s (link up)", id, r.service, r.label, r.key.client, where), "took", time.Since(r.openedAt))
}

// hand queues giving process p a session: its files over the control socket, then the
// OpenSession call; done gets the answer on the loop.
func (s *Supervisor) hand(p *process, req *controlpb.OpenSessionRequest, files []*os.File, done func(error)) {
	p.calls.Push(call{
		what: fmt.Sprintf("OpenSession of session %d", req.SessionId),
		do: func(ctx context.Context) error {
			if len(files) > 0 {
				// A component that stopped reading its control socket must not block its queue
				// past the call's time.
				deadline, _ := ctx.Deadline()
				p.sock.SetWriteDeadline(deadline)
				if err := component.SendFiles(p.sock, req.SessionId, files); err != nil {
					return err
				}
			}
			_, err := p.ctl.OpenSession(ctx, req)
			return err
		},
		done:  done,
		files: files,
	})
}

// openAtParent opens r at a service the supervisor serves itself.
func (s *Supervisor) openAtParent(r *request) {
	if r.opening {
		return
	}
	s.nextID++
	id := s.nextID
	if cl := s.children[r.key.client]; cl != nil {
		for i, p := range cl.kept {
			if p.service == r.service && maps.Equal(p.request, r.args) {
				cl.kept = slices.Delete(cl.kept, i, i+1)
				s.log.Info(fmt.Sprintf("%s takes over the %s session of its crashed process", r.key.client, r.service))
				s.openedAtParent(r, id, p, nil)
				return
			}
		}
	}
	r.openedAt, r.opening = time.Now(), true
	service, client, args, lease := r.service, r.key.client, r.args, s.leaseOf(r.key.client)
	s.launching.Add(1)
	go func() {
		defer s.launching.Done()
		p, err := s.openParent(service, client, args, id, lease)
		select {
		case s.events <- func() { s.openedAtParent(r, id, p, err) }:
		case <-s.quitting:
			if p != nil {
				p.close()
			}
		}
	}()
}

// openedAtParent hands the client what openParent made, unless the request went away meanwhile
// (its client exited or the run is stopping).
func (s *Supervisor) openedAtParent(r *request, id uint64, p *parentSession, err error) {
	r.opening = false
	cl := s.children[r.key.client]
	if s.requests[r.key] != r || s.stopping || cl == nil || cl.proc == nil || cl.state != Running {
		if p != nil {
			s.closeParent(p)
		}
		return
	}
	if err != nil {
		s.deny(r, err.Error())
		return
	}
	req := &controlpb.OpenSessionRequest{
		SessionId: id, RequestId: r.key.id, Role: controlpb.Role_CLIENT, Service: r.service, Label: r.decision.Label,
		Args: p.args, Files: uint32(len(p.files)), Device: &controlpb.DeviceSpec{},
	}
	r.session, r.linkUp, r.parent, r.waitNoted = id, true, p, false
	// The supervisor keeps its copies of the files until the session closes: a TAP that only a
	// crashed client held would go away with it.
	s.hand(cl.proc, req, p.files, func(err error) { s.clientOpened(r, id, "", err) })
}

// closeKept deletes the parent-service sessions and lets go of the descriptors c's crashed
// process left for the next.
func (s *Supervisor) closeKept(c *child) {
	for _, p := range c.kept {
		s.closeParent(p)
	}
	c.kept = nil
	c.dropKeptFiles()
}

// closeParent deletes what a parent-service session made, in the background like end.
func (s *Supervisor) closeParent(p *parentSession) {
	s.ending.Add(1)
	go func() {
		defer s.ending.Done()
		p.close()
	}()
}

// sessionFiles creates the files both sides of r's new session get.
func (s *Supervisor) sessionFiles(r *request, name string) ([]*os.File, error) {
	if r.device != nil {
		return newDeviceFiles(name, *r.device)
	}
	sf, err := packetstream.NewSessionFiles(name, r.tx, r.rx)
	if err != nil {
		return nil, err
	}
	return sf.Files(), nil
}

// closeAt queues closing session id at c's process.
func (s *Supervisor) closeAt(c *child, id uint64, reason string) {
	if c == nil || c.proc == nil || c.state != Running {
		return
	}
	s.tell(c, fmt.Sprintf("CloseSession of session %d", id), func(ctx context.Context, ctl controlpb.ComponentClient) error {
		_, err := ctl.CloseSession(ctx, &controlpb.CloseSessionRequest{SessionId: id, Reason: reason})
		return err
	})
}

// closeSession closes an open session on both sides that are still there.
func (s *Supervisor) closeSession(r *request, reason string, atClient bool) {
	if r.session == 0 {
		return
	}
	id := r.session
	handed := !r.opening // the client was handed the session (or is about to be)
	r.session, r.opening, r.linkUp = 0, false, false
	if cl := s.children[r.key.client]; cl != nil {
		cl.ramUsed -= r.ram
		if atClient && handed && r.key.id != configRequestID {
			s.closeAt(cl, id, reason)
		}
	}
	r.ram = 0
	if r.parent != nil {
		s.closeParent(r.parent)
		r.parent = nil
	}
	if r.decision != nil {
		s.closeAt(s.children[r.decision.Server], id, reason)
	}
	s.log.Debug(fmt.Sprintf("session %d %s %q of %s closed (link down): %s", id, r.service, r.label, r.key.client, reason))
}

// dropSessions closes c's sessions: those it serves on their clients (they wait for it to
// come back), those it requested on their servers (it will request them again).
func (s *Supervisor) dropSessions(c *child, reason string) {
	name := c.start.Name
	for k, r := range s.requests {
		switch {
		case k.client == name:
			if r.parent != nil && r.session != 0 && !r.opening {
				c.kept = append(c.kept, r.parent) // until its next process or a stop (closeKept)
				r.parent = nil
			}
			s.closeSession(r, reason, false)
			delete(s.requests, k)
		case r.decision != nil && r.decision.Server == name:
			s.closeSession(r, reason, true)
		}
	}
	c.ramUsed = 0
}
