package supervisor

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nicstack/nicstack/internal/fifo"
	"github.com/nicstack/nicstack/internal/netns"
	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Options configure a supervisor run.
type Options struct {
	BinDirs []string // where component binaries are looked up, in order
	// ParentServices are the sessions the supervisor serves itself (routed to <parent/>), by
	// service name; see ParentService. Nil: none.
	ParentServices map[string]ParentService
	// Components is the table of components (package components): each start's <config> is
	// checked against its binary's Spec before launch, and problems are logged. Nil: no checks
	// (a test of the supervisor alone).
	Components component.Table
	// RunDir is the per-run folder (go-plugin sockets); made unique under os.TempDir when
	// empty. It is removed when the run ends.
	RunDir  string
	Out     *Output
	Verbose bool
	// Restart back-off: the first restart waits MinBackoff, each further one twice as long up
	// to MaxBackoff; a component that ran StableAfter starts again from MinBackoff.
	MinBackoff, MaxBackoff, StableAfter time.Duration
	// WatchInterval is how often the scenario file is checked for changes (0: never).
	WatchInterval time.Duration
	Topology      *Topology // nil: read from sysfs
	// CallTimeout bounds each control call to a component.
	CallTimeout time.Duration
}

func (o *Options) defaults() {
	if o.Out == nil {
		o.Out = NewOutput(os.Stderr, false)
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 10 * time.Second
	}
	if o.StableAfter == 0 {
		o.StableAfter = 10 * time.Second
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = 5 * time.Second
	}
}

// Supervisor runs one scenario. All state belongs to the goroutine in Run (the event loop);
// everything else talks to it through events. Slow work runs beside the loop and reports
// back: launching a component, stopping one, making and deleting a parent service's session,
// telling a client of a denial. The session calls (OpenSession, CloseSession, LinkState) and
// UpdateConfig go to a queue per process (calls.go), made in order by one goroutine each and
// bounded by CallTimeout; their results come back as events, so a hung component holds up
// only its own calls.
type Supervisor struct {
	path   string
	opts   Options
	log    *slog.Logger
	topo   *Topology
	events chan func()
	done   chan struct{}
	// quitting closes when the run stops; launches still in flight then kill what they
	// started instead of handing it over.
	quitting  chan struct{}
	launching sync.WaitGroup // launches and parent-service sessions being made
	// ending counts processes being stopped, parent-service sessions being deleted and the
	// processes' call queues.
	ending sync.WaitGroup

	sc       *Scenario
	children map[string]*child
	requests map[reqKey]*request
	nextID   uint64
	stopping bool

	nsMu       sync.Mutex // namespaces is read by Netns callers outside the supervisor goroutine
	namespaces map[string]*netns.NS
}

// child is a <start> and its current process.
type child struct {
	start     *Start
	place     Placement
	state     string // starting, running, waiting (for a restart), failed, stopped
	proc      *process
	life      int // counts launches; events of an earlier life are dropped
	restarts  int
	exitCode  int
	started   time.Time
	backoff   time.Duration
	announced map[string]bool
	ramUsed   int
	cpu       *cpuSample // shared with Status callers outside the supervisor goroutine
}

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
	// opening: the session is being made, by the supervisor for a parent service (session
	// still 0) or at the server; the client is handed it once that is done.
	opening bool
}

// New prepares a supervisor for the scenario at path. Its owner stops it on Ctrl-C (Run's
// context), which deletes the run's namespaces: the netns package must not exit first.
func New(path string, opts Options) (*Supervisor, error) {
	opts.defaults()
	netns.LeaveSignals()
	sc, err := LoadScenario(path)
	if err != nil {
		return nil, err
	}
	topo := opts.Topology
	if topo == nil {
		if topo, err = ReadTopology(); err != nil {
			return nil, err
		}
	}
	s := &Supervisor{
		path: path, opts: opts, log: opts.Out.Logger(opts.Verbose), topo: topo,
		events: make(chan func(), 64), done: make(chan struct{}), quitting: make(chan struct{}),
		sc: sc, children: map[string]*child{}, requests: map[reqKey]*request{},
		namespaces: map[string]*netns.NS{},
	}
	for _, st := range sc.Starts {
		if _, err := s.binary(st); err != nil {
			return nil, err
		}
	}
	s.warnUnknown(sc)
	return s, nil
}

// warnUnknown logs the nodes and attributes init does not know, and what a component's
// registered config check refuses: errors for `nicstack check`, warnings at run time, as in
// Genode (the file may be fixed while the run goes on).
func (s *Supervisor) warnUnknown(sc *Scenario) {
	for _, e := range config.Check(sc.Root, Schema) {
		s.log.Warn(e.Error())
	}
	for _, st := range sc.Starts {
		if s.opts.Components == nil {
			break
		}
		spec, err := s.opts.Components.Lookup(st.Binary)
		if err != nil {
			s.log.Warn(err.Error(), "child", st.Name)
			continue
		}
		for _, e := range checkStartConfig(spec, st) {
			s.log.Warn(e.Error(), "child", st.Name)
		}
	}
}

// BinDirs lists where component binaries are looked up: extra (a --bin flag) when set, the
// folder of the running executable (nicstack), then bin/.
func BinDirs(extra string) []string {
	var dirs []string
	if extra != "" {
		dirs = append(dirs, extra)
	}
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	return append(dirs, "bin")
}

// binary finds a start's binary in the binary folders.
func (s *Supervisor) binary(st *Start) (string, error) {
	for _, d := range s.opts.BinDirs {
		p := filepath.Join(d, st.Binary)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: binary %q of %q not found in %v (make build puts every component in bin/)", st.Node.Pos, st.Binary, st.Name, s.opts.BinDirs)
}

// post runs fn on the supervisor's goroutine; it is dropped once the run has ended.
func (s *Supervisor) post(fn func()) {
	select {
	case s.events <- fn:
	case <-s.done:
	}
}

// call runs fn on the supervisor's goroutine and waits for it; false once the run has ended.
func (s *Supervisor) call(fn func()) bool {
	ran := make(chan struct{})
	select {
	case s.events <- func() { fn(); close(ran) }:
	case <-s.done:
		return false
	}
	select {
	case <-ran:
		return true
	case <-s.done:
		return false
	}
}

// maxRunDirLen bounds the run folder's path: go-plugin puts each component's socket there as
// "plugin<up to 10 digits>", and a Unix socket's path holds at most 107 bytes. A longer one
// makes the component exit before its handshake.
const maxRunDirLen = 107 - len("/plugin4294967295")

// Run starts every component and keeps them running until ctx ends, then stops them all and
// removes what the run created.
func (s *Supervisor) Run(ctx context.Context) error {
	defer close(s.done)
	runDir := s.opts.RunDir
	if runDir == "" {
		base := "" // os.TempDir, unless a long TMPDIR would make the sockets' paths too long
		if len(os.TempDir())+len("/nicstack-run-4294967295") > maxRunDirLen {
			base = "/tmp"
		}
		d, err := os.MkdirTemp(base, "nicstack-run-")
		if err != nil {
			return err
		}
		runDir = d
	} else if len(runDir) > maxRunDirLen {
		return fmt.Errorf("run folder %s: %d bytes is too long for the Unix sockets in it (at most %d)", runDir, len(runDir), maxRunDirLen)
	} else if err := os.MkdirAll(runDir, 0o700); err != nil {
		return err
	}
	s.opts.RunDir = runDir
	defer os.RemoveAll(runDir)
	defer s.deleteNamespaces()

	if note := ScaleNote(s.sc.Space, s.topo); note != "" {
		s.log.Info("note: " + note)
	}
	for _, st := range s.sc.Starts {
		s.children[st.Name] = &child{start: st, backoff: s.opts.MinBackoff, cpu: &cpuSample{}}
	}
	for _, st := range s.sc.Starts {
		s.launch(s.children[st.Name])
	}
	var watch <-chan time.Time
	var stat os.FileInfo
	if s.opts.WatchInterval > 0 {
		t := time.NewTicker(s.opts.WatchInterval)
		defer t.Stop()
		watch = t.C
		stat, _ = os.Stat(s.path)
	}
	for {
		select {
		case <-ctx.Done():
			s.stopAll()
			return nil
		case fn := <-s.events:
			fn()
		case <-watch:
			fi, err := os.Stat(s.path)
			if err != nil || stat != nil && fi.ModTime().Equal(stat.ModTime()) && fi.Size() == stat.Size() {
				continue
			}
			stat = fi
			s.reload()
		}
	}
}

func (s *Supervisor) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.CallTimeout)
}

// launch starts c's process and hands it its config off the supervisor goroutine (that takes
// 50-180 ms, during which the others' events keep flowing); launched takes over from there.
func (s *Supervisor) launch(c *child) {
	c.life++
	c.state = "starting"
	c.announced = map[string]bool{}
	c.place = Place(c.start, s.sc.Space, s.topo)
	if c.place.Warning != "" {
		s.log.Warn(c.place.Warning)
	}
	bin, err := s.binary(c.start)
	if err != nil {
		s.failed(c, err)
		return
	}
	life, name, cpus := c.life, c.start.Name, c.place.CPUs
	req := &controlpb.StartRequest{Name: name, Cpus: cpus.String(), Config: configText(s.sc, c.start)}
	runDir, out := s.opts.RunDir, s.opts.Out
	s.launching.Add(1)
	go func() {
		defer s.launching.Done()
		t0 := time.Now()
		p, err := launch(bin, runDir, cpus, out, name)
		if err == nil {
			ctx, cancel := s.ctx()
			_, serr := p.ctl.Start(ctx, req)
			cancel()
			if serr != nil {
				err = fmt.Errorf("%s did not start (exit code %d): %v", name, p.kill(), serr)
				p = nil
			}
		}
		select {
		case s.events <- func() { s.launched(c, life, p, err, bin, time.Since(t0)) }:
		case <-s.quitting:
			if p != nil {
				p.kill()
			}
		}
	}()
}

// launched follows a component whose launch succeeded (p) or failed (err), unless it was
// stopped or replaced meanwhile.
func (s *Supervisor) launched(c *child, life int, p *process, err error, bin string, took time.Duration) {
	if c.life != life || s.stopping || s.children[c.start.Name] != c {
		if p != nil {
			s.end(p)
		}
		return
	}
	if err != nil {
		s.failed(c, err)
		return
	}
	c.proc, c.started, c.state = p, time.Now(), "running"
	p.watchExit(func() { s.post(func() { s.exited(c, life) }) })
	s.log.Info(fmt.Sprintf("%s started", c.start.Name), "pid", p.pid, "cpus", c.place.CPUs.String(), "binary", bin, "took", took)
	evctx, evcancel := context.WithCancel(context.Background())
	p.cancel = evcancel
	p.calls = fifo.New[call]()
	s.ending.Add(1)
	go s.serveCalls(evctx, c.start.Name, p.calls)
	go s.follow(evctx, c, life, p)
	if c.start.Heartbeat && s.sc.HeartbeatMS > 0 {
		go s.heartbeat(evctx, c, life, p, time.Duration(s.sc.HeartbeatMS)*time.Millisecond)
	}
	// Sessions this component serves open once it announces them; the ones it requests
	// arrive as events.
}

// configText hands a component its <config> (and nothing else of the scenario) with the
// positions the nodes had in the scenario, so that its errors name the scenario's lines.
func configText(sc *Scenario, st *Start) *controlpb.Config {
	if st.Config == nil {
		return &controlpb.Config{}
	}
	return &controlpb.Config{Text: string(st.Config.XML()), Origin: sc.File, Positions: component.Positions(st.Config)}
}

// follow forwards the component's events to the supervisor goroutine.
func (s *Supervisor) follow(ctx context.Context, c *child, life int, p *process) {
	stream, err := p.ctl.Events(ctx, &controlpb.EventsRequest{})
	if err != nil {
		return
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return
		}
		s.post(func() {
			if c.life == life && c.proc == p {
				s.event(c, ev)
			}
		})
	}
}

func (s *Supervisor) heartbeat(ctx context.Context, c *child, life int, p *process, rate time.Duration) {
	t := time.NewTicker(rate)
	defer t.Stop()
	missed := 0
	for seq := uint64(1); ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, rate)
		_, err := p.ctl.Heartbeat(hctx, &controlpb.HeartbeatRequest{Seq: seq})
		cancel()
		if err == nil {
			missed = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if missed++; missed == 3 {
			s.post(func() {
				if c.life == life && c.proc == p {
					s.log.Warn(fmt.Sprintf("%s missed 3 heartbeats; restarting it", c.start.Name))
					p.cmd.Process.Kill()
				}
			})
			return
		}
	}
}

func (s *Supervisor) event(c *child, ev *controlpb.Event) {
	switch k := ev.Kind.(type) {
	case *controlpb.Event_Announce:
		svc := k.Announce.GetService()
		if !contains(c.start.Provides, svc) {
			s.log.Warn(fmt.Sprintf("%s announced %s, which its <provides> does not list; ignored", c.start.Name, svc))
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
		s.deny(r, s.noParentService(r.service).Error())
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
	if cl == nil || cl.state != "running" {
		return
	}
	if r.decision.Parent {
		s.openAtParent(r)
		return
	}
	if srv == nil || srv.state != "running" || !srv.announced[r.service] {
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
		req.Tx = &controlpb.StreamSize{QueueSize: uint32(r.tx.QueueSize), BulkSize: uint32(r.tx.BulkSize)}
		req.Rx = &controlpb.StreamSize{QueueSize: uint32(r.rx.QueueSize), BulkSize: uint32(r.rx.BulkSize)}
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
	creq := proto.Clone(req).(*controlpb.OpenSessionRequest)
	creq.Role = controlpb.Role_CLIENT
	s.hand(cl.proc, creq, files, func(err error) {
		closeFiles(files) // both sides hold their own copies once sent
		s.clientOpened(r, id, srv.start.Name, err)
	})
	if !r.linkUp {
		s.linkState(r)
	}
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
	if r.parent != nil {
		where = fmt.Sprintf("the parent: %s in namespace %s", r.parent.iface, r.parent.ns.Name)
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
	r.openedAt, r.opening = time.Now(), true
	service, client, args := r.service, r.key.client, r.args
	s.launching.Add(1)
	go func() {
		defer s.launching.Done()
		p, err := s.openParent(service, client, args, id)
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
	if s.requests[r.key] != r || s.stopping || cl == nil || cl.proc == nil || cl.state != "running" {
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
	s.hand(cl.proc, req, p.files, func(err error) {
		if err == nil && r.session == id {
			closeFiles(p.files) // the client holds its own copies
		}
		// Otherwise closing the session (now or before) deletes p and its files.
		s.clientOpened(r, id, "", err)
	})
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
	if c == nil || c.proc == nil || c.state != "running" {
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
		if atClient && handed {
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

// exited handles the end of a component's process: its sessions close on their peers, its
// requests go away, and it starts again after the back-off.
func (s *Supervisor) exited(c *child, life int) {
	if c.life != life || c.proc == nil {
		return
	}
	p := c.proc
	c.proc = nil
	t0 := time.Now()
	c.exitCode = p.kill()
	s.log.Debug(fmt.Sprintf("%s reaped", c.start.Name), "took", time.Since(t0))
	c.state = "waiting"
	s.dropSessions(c, fmt.Sprintf("%s exited", c.start.Name))
	if s.stopping {
		c.state = "stopped"
		return
	}
	if time.Since(c.started) > s.opts.StableAfter {
		c.backoff = s.opts.MinBackoff
	}
	wait := c.backoff
	c.backoff = min(2*c.backoff, s.opts.MaxBackoff)
	s.log.Warn(fmt.Sprintf("%s exited (code %d); restarting in %v", c.start.Name, c.exitCode, wait))
	s.restartAfter(c, wait)
}

func (s *Supervisor) restartAfter(c *child, wait time.Duration) {
	life := c.life
	time.AfterFunc(wait, func() {
		s.post(func() {
			if c.life == life && c.proc == nil && !s.stopping && s.children[c.start.Name] == c {
				c.restarts++
				s.launch(c)
			}
		})
	})
}

// dropSessions closes c's sessions: those it serves on their clients (they wait for it to
// come back), those it requested on their servers (it will request them again).
func (s *Supervisor) dropSessions(c *child, reason string) {
	name := c.start.Name
	for k, r := range s.requests {
		switch {
		case k.client == name:
			s.closeSession(r, reason, false)
			delete(s.requests, k)
		case r.decision != nil && r.decision.Server == name:
			s.closeSession(r, reason, true)
		}
	}
	c.ramUsed = 0
}

func (s *Supervisor) failed(c *child, err error) {
	c.state = "failed"
	s.log.Error(err.Error())
	if s.stopping {
		return
	}
	wait := c.backoff
	c.backoff = min(2*c.backoff, s.opts.MaxBackoff)
	s.log.Warn(fmt.Sprintf("%s: trying again in %v", c.start.Name, wait))
	s.restartAfter(c, wait)
}

// stop closes c's sessions at their peers and ends its process (its Stop closes them there).
func (s *Supervisor) stop(c *child) {
	c.life++ // its exit is expected; a launch in flight or a pending restart is void
	p := c.proc
	c.proc = nil
	c.state = "stopped"
	if p == nil {
		return
	}
	s.dropSessions(c, fmt.Sprintf("%s stopped", c.start.Name))
	s.end(p)
}

// end stops process p in the background (a Stop call, then go-plugin's kill, which waits and
// escalates to SIGKILL), so that a restart or a slow exit never holds up the event loop. Its
// queued calls are dropped and the one in flight is cancelled. The run waits for every end
// before it returns.
func (s *Supervisor) end(p *process) {
	if p.cancel != nil {
		p.cancel()
	}
	s.ending.Add(1)
	go func() {
		defer s.ending.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		p.ctl.Stop(ctx, &controlpb.StopRequest{})
		cancel()
		p.kill()
	}()
}

func (s *Supervisor) stopAll() {
	s.stopping = true
	close(s.quitting)
	s.launching.Wait()
	// Launches that finished before quitting closed wait in the queue; launched kills them.
	s.drain()
	for i := len(s.sc.Starts) - 1; i >= 0; i-- {
		if c := s.children[s.sc.Starts[i].Name]; c != nil {
			s.stop(c)
		}
	}
	for _, c := range s.children {
		s.stop(c) // starts removed by a reload but still running
	}
	s.ending.Wait()
	// Call results that made it into the queue still close their session's files.
	s.drain()
	s.log.Info("all components stopped")
}

// drain runs the events waiting in the queue.
func (s *Supervisor) drain() {
	for {
		select {
		case fn := <-s.events:
			fn()
		default:
			return
		}
	}
}

// reload applies a changed scenario: new starts start, removed ones stop, a start whose launch
// parameters (version, binary, ram, affinity, provides, routes) changed restarts, and a start
// whose <config> alone changed gets it live.
func (s *Supervisor) reload() {
	sc, err := LoadScenario(s.path)
	if err != nil {
		s.log.Error("scenario changed but is broken; keeping the running one: " + err.Error())
		return
	}
	old := s.sc
	s.sc = sc
	s.warnUnknown(sc)
	for name, c := range s.children {
		if sc.Start(name) == nil {
			s.log.Info(fmt.Sprintf("%s removed from the scenario; stopping it", name))
			s.stop(c)
			delete(s.children, name)
		}
	}
	for _, st := range sc.Starts {
		c := s.children[st.Name]
		if c == nil {
			c = &child{start: st, backoff: s.opts.MinBackoff, cpu: &cpuSample{}}
			s.children[st.Name] = c
			s.launch(c)
			continue
		}
		prev := c.start
		c.start = st
		switch {
		case launchKey(old, prev) != launchKey(sc, st):
			if prev.Version != st.Version {
				s.log.Info(fmt.Sprintf("%s: version %q -> %q; restarting it", st.Name, prev.Version, st.Version))
			} else {
				s.log.Info(fmt.Sprintf("%s: <start> changed; restarting it", st.Name))
			}
			s.stop(c)
			c.backoff = s.opts.MinBackoff
			s.launch(c)
		case !sameConfig(prev, st) && c.proc != nil && c.state == "running":
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
