// Package component is what a component process links: it serves the supervisor's control
// protocol over go-plugin, hands the component its config (and every later change), opens the
// sessions the supervisor routes to it or grants it, and reports its counters.
//
// A component's main.go is a few lines: its Spec from the one table (package components) and
// the constructor of its Handler:
//
//	func main() {
//		component.Main(components.Lookup("test_echo"), func(c *component.Component) (component.Handler, error) {
//			return newEcho(c), nil
//		})
//	}
package component

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/netdev"
	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/fifo"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Handler is a component's logic as the supervisor drives it. Its calls never overlap.
type Handler interface {
	// Configure gets the <config> of the component's <start> node as its Spec's Parse made
	// it (ConfigOf asserts its type; a Spec without Parse gives the *config.Node): once before
	// any session, then again whenever the scenario changes it. An error keeps the previous
	// config.
	Configure(cfg any) error
	// Open hands a session that is up: one routed to this component (s.Server is set) or one
	// it requested (s.Client is set). For a client, Open is "link up".
	Open(s *Session) error
	// Close takes a session away ("link down" for a client: its server went away or the
	// session was released). The handler must stop touching the session's memory before
	// returning; it is unmapped right after.
	Close(s *Session)
	// Stop ends the handler's own goroutines (loops, timers) when the supervisor stops the
	// component, after every session was closed; the process exits when it returns.
	Stop()
}

// DenyHandler is implemented by handlers that want to know when a session they requested will
// not be served (no route, too little ram, a parent service that failed). The reason is also
// logged.
type DenyHandler interface {
	Denied(request uint64, reason string)
}

// LinkHandler is implemented by handlers that care about the link state a session's server
// reports (a driver's cable, say) beyond the session being open.
type LinkHandler interface {
	Link(s *Session, up bool)
}

// ContentHandler is implemented by handlers of ROM or Report sessions, which carry text
// instead of frames (Genode's dataspace of a ROM module or a report): a ROM client gets its
// module's content, again at each change (empty: the server removed the module); a Report
// server gets each report its client sends.
type ContentHandler interface {
	Content(s *Session, data []byte, empty bool)
}

// filesTimeout bounds the wait for a session's files, which the supervisor sends before the
// OpenSession call that names them.
const filesTimeout = 5 * time.Second

// Component is the component's side of the supervisor connection.
type Component struct {
	controlpb.UnimplementedComponentServer

	Name string
	CPUs string // the CPU set the supervisor pinned this process to
	Log  *slog.Logger
	Spec Spec // what the table says of this component; its Check guards and parses every config

	newHandler func(*Component) (Handler, error)
	inbox      *fileInbox

	mu       sync.Mutex // serializes handler calls
	h        Handler
	sessions map[uint64]*Session
	captures map[uint64]*tapping // by capture id

	counterMu sync.Mutex
	counters  map[string]*atomic.Uint64
	queues    map[string]func() netdev.Depth // by hop, under counterMu

	nextRequest atomic.Uint64
	events      *fifo.Queue[*controlpb.Event] // for the Events stream; never blocks the component
	stopped     chan struct{}
	stopOnce    sync.Once
	exitValue   atomic.Int32  // what Main exits with: 0, or what Exit was given
	exiting     atomic.Bool   // Exit was called: the component ends on its own
	state       []byte        // the state region, nil without one
	control     *net.UnixConn // the control socket, for Keep; nil outside Main
}

// New returns a component that builds its handler with newHandler once the supervisor has
// sent the name and config. Main uses it; tests drive it directly through its gRPC methods.
func New(spec Spec, log *slog.Logger, newHandler func(*Component) (Handler, error)) *Component {
	return &Component{
		Spec:       spec,
		Log:        log,
		newHandler: newHandler,
		inbox:      newFileInbox(),
		sessions:   map[uint64]*Session{},
		captures:   map[uint64]*tapping{},
		counters:   map[string]*atomic.Uint64{},
		queues:     map[string]func() netdev.Depth{},
		events:     fifo.New[*controlpb.Event](),
		stopped:    make(chan struct{}),
	}
}

// Counter returns the component's own counter called name (interrupts, say), created at zero.
// The supervisor reads it with the session counters.
func (c *Component) Counter(name string) *atomic.Uint64 {
	c.counterMu.Lock()
	defer c.counterMu.Unlock()
	ctr, ok := c.counters[name]
	if !ok {
		ctr = new(atomic.Uint64)
		c.counters[name] = ctr
	}
	return ctr
}

// Queue names a hop of the component's data path (a driver's ring, frames a router holds)
// whose depth the supervisor reads with the counters; nil takes it away. depth runs on the
// goroutine that answers the supervisor, beside the component's loops: it reads only atomics,
// never a loop's private state. The queues of the packet streams a component sends on are
// reported without it.
func (c *Component) Queue(hop string, depth func() netdev.Depth) {
	c.counterMu.Lock()
	defer c.counterMu.Unlock()
	if depth == nil {
		delete(c.queues, hop)
		return
	}
	c.queues[hop] = depth
}

// StateRegion is the component's state region (Spec.State): shared memory that the supervisor
// keeps across the component's restarts after a crash, handed to each of its processes as
// the previous one left it (zero at the first). Nil when the Spec asks for none, or in a
// component not started by a supervisor.
func (c *Component) StateRegion() []byte { return c.state }

// WriteFile has the supervisor write data to path, a file this component's config names
// (Spec.Files), replacing it at once. A component opens no files itself: a confined one
// (package sandbox) cannot. The supervisor logs a path the scenario does not name.
func (c *Component) WriteFile(path string, data []byte) {
	c.events.Push(&controlpb.Event{Kind: &controlpb.Event_WriteFile{WriteFile: &controlpb.WriteFile{Path: path, Data: data}}})
}

// AppendFile has the supervisor add data at the end of path, a file this component's config
// names, in the order of the calls (a capture file, started with WriteFile). data is copied.
func (c *Component) AppendFile(path string, data []byte) {
	c.events.Push(&controlpb.Event{Kind: &controlpb.Event_WriteFile{WriteFile: &controlpb.WriteFile{Path: path, Data: bytes.Clone(data), Append: true}}})
}

// Announce makes service reachable; session requests routed here wait until then.
func (c *Component) Announce(service string) {
	c.events.Push(&controlpb.Event{Kind: &controlpb.Event_Announce{Announce: &controlpb.Announce{Service: service}}})
}

// Request asks the supervisor for a session and returns the request's id. The session arrives
// through Handler.Open once routed and its server is up, again after each time its server
// came back; a denial comes through DenyHandler.
func (c *Component) Request(service, label string, args map[string]string, tx, rx packetstream.Config) uint64 {
	id := c.nextRequest.Add(1)
	c.events.Push(&controlpb.Event{Kind: &controlpb.Event_Request{Request: &controlpb.SessionRequest{
		RequestId: id, Service: service, Label: label, Args: args,
		Tx: streamSize(tx), Rx: streamSize(rx),
	}}})
	return id
}

// RequestDevice asks for a device session and returns the request's id: one served by another
// component that announced service, or a service the supervisor provides itself (routed to
// <parent/>: "Tap", "Packet"; spec is then empty). The client pays sum(spec.Mems) from its
// ram quota. The session arrives through Handler.Open as Request's do.
func (c *Component) RequestDevice(service, label string, args map[string]string, spec DeviceSpec) uint64 {
	id := c.nextRequest.Add(1)
	c.events.Push(&controlpb.Event{Kind: &controlpb.Event_Request{Request: &controlpb.SessionRequest{
		RequestId: id, Service: service, Label: label, Args: args, Device: DeviceSpecProto(spec),
	}}})
	return id
}

// RequestContent asks for a ROM or Report session (service) labelled label: no shared
// memory, its text goes through the supervisor (Send, ContentHandler). It arrives through
// Handler.Open as a device session.
func (c *Component) RequestContent(service, label string) uint64 {
	return c.RequestDevice(service, label, nil, DeviceSpec{})
}

// Send hands the other side of ROM or Report session s data: a ROM server its module's
// content, a Report client a report. data is not copied; the caller leaves it alone.
func (c *Component) Send(s *Session, data []byte) {
	c.events.Push(&controlpb.Event{Kind: &controlpb.Event_Content{Content: &controlpb.Content{SessionId: s.ID, Data: data}}})
}

// SendEmpty tells the client of ROM session s that the module is gone (dynamic_rom's <empty/>).
func (c *Component) SendEmpty(s *Session) {
	c.events.Push(&controlpb.Event{Kind: &controlpb.Event_Content{Content: &controlpb.Content{SessionId: s.ID, Empty: true}}})
}

// Release gives up the session of request id.
func (c *Component) Release(id uint64) {
	c.events.Push(&controlpb.Event{Kind: &controlpb.Event_Release{Release: &controlpb.SessionRelease{RequestId: id}}})
}

// ReportLink tells the client of session s (served here) that the link is up or down.
func (c *Component) ReportLink(s *Session, up bool) {
	c.events.Push(&controlpb.Event{Kind: &controlpb.Event_LinkState{LinkState: &controlpb.LinkStateReport{SessionId: s.ID, Up: up}}})
}

func (c *Component) Start(_ context.Context, req *controlpb.StartRequest) (*controlpb.StartReply, error) {
	cfg, err := parseConfig(req.GetName(), req.GetConfig())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h != nil {
		return nil, fmt.Errorf("component %s already started", c.Name)
	}
	c.Name, c.CPUs = req.GetName(), req.GetCpus()
	typed, err := c.parse(cfg)
	if err != nil {
		return nil, err
	}
	h, err := c.newHandler(c)
	if err != nil {
		return nil, err
	}
	if err := h.Configure(typed); err != nil {
		return nil, err
	}
	c.h = h
	return &controlpb.StartReply{}, nil
}

// parse makes the typed config of n with the component's Spec, as `nicstack check` does:
// what Parse refuses is refused. (The supervisor logs the warnings, with the same table,
// before it hands a config.)
func (c *Component) parse(n *config.Node) (any, error) {
	cfg, _, err := c.Spec.Check(n, c.Name)
	return cfg, err
}

func (c *Component) started() error {
	if c.h == nil {
		return fmt.Errorf("component not started")
	}
	return nil
}

func (c *Component) UpdateConfig(_ context.Context, req *controlpb.Config) (*controlpb.Empty, error) {
	cfg, err := parseConfig(c.Name, req)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.started(); err != nil {
		return nil, err
	}
	typed, err := c.parse(cfg)
	if err != nil {
		return nil, err
	}
	return &controlpb.Empty{}, c.h.Configure(typed)
}

func (c *Component) Events(_ *controlpb.EventsRequest, stream controlpb.Component_EventsServer) error {
	for {
		ev, ok := c.events.Pop(stream.Context().Done(), c.stopped)
		if !ok {
			return nil
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
}

func (c *Component) OpenSession(_ context.Context, req *controlpb.OpenSessionRequest) (*controlpb.Empty, error) {
	id := req.GetSessionId()
	s := &Session{ID: id, Request: req.GetRequestId(), Service: req.GetService(), Label: req.GetLabel(), Args: req.GetArgs()}
	switch req.GetRole() {
	case controlpb.Role_CLIENT:
		s.Role = Client
	case controlpb.Role_SERVER:
		s.Role = Server
	default:
		return nil, fmt.Errorf("session %d: no role", id)
	}
	var files []*os.File
	if n := int(req.GetFiles()); n > 0 {
		var err error
		if files, err = c.inbox.take(id, n, filesTimeout); err != nil {
			return nil, err
		}
	}
	if req.GetDevice() != nil {
		s.Files, s.Spec = files, DeviceSpecFrom(req.GetDevice())
	} else if err := openStream(s, files, req); err != nil {
		return nil, fmt.Errorf("session %d: %w", id, err)
	}
	s.linkUp.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.started()
	if err == nil {
		if old, ok := c.sessions[id]; ok {
			c.close(old)
		}
		if err = c.h.Open(s); err == nil {
			c.sessions[id] = s
			c.tapNew(s)
			return &controlpb.Empty{}, nil
		}
	}
	s.unmap()
	return nil, fmt.Errorf("session %d (%s %q): %w", id, s.Service, s.Label, err)
}

// close runs with mu held.
func (c *Component) close(s *Session) {
	if s.tappedBy != 0 {
		c.untap(s)
	}
	c.h.Close(s)
	delete(c.sessions, s.ID)
	if err := s.unmap(); err != nil {
		c.Log.Warn("unmapping session", "session", s.ID, "err", err)
	}
}

func (c *Component) CloseSession(_ context.Context, req *controlpb.CloseSessionRequest) (*controlpb.Empty, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.sessions[req.GetSessionId()]; ok {
		s.linkUp.Store(false)
		s.ClientRestarts = s.Role == Server && strings.HasSuffix(req.GetReason(), RestartsReason)
		c.close(s)
	}
	return &controlpb.Empty{}, nil
}

func (c *Component) LinkState(_ context.Context, req *controlpb.LinkStateRequest) (*controlpb.Empty, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sessions[req.GetSessionId()]
	if !ok {
		return nil, fmt.Errorf("no session %d", req.GetSessionId())
	}
	s.linkUp.Store(req.GetUp())
	if lh, ok := c.h.(LinkHandler); ok {
		lh.Link(s, req.GetUp())
	}
	return &controlpb.Empty{}, nil
}

func (c *Component) Content(_ context.Context, req *controlpb.ContentRequest) (*controlpb.Empty, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sessions[req.GetSessionId()]
	if !ok {
		return nil, fmt.Errorf("no session %d", req.GetSessionId())
	}
	if ch, ok := c.h.(ContentHandler); ok {
		ch.Content(s, req.GetData(), req.GetEmpty())
	}
	return &controlpb.Empty{}, nil
}

func (c *Component) Denied(_ context.Context, req *controlpb.DeniedRequest) (*controlpb.Empty, error) {
	c.Log.Warn("session request denied", "request", req.GetRequestId(), "reason", req.GetReason())
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.started(); err != nil {
		return nil, err
	}
	if dh, ok := c.h.(DenyHandler); ok {
		dh.Denied(req.GetRequestId(), req.GetReason())
	}
	return &controlpb.Empty{}, nil
}

func (c *Component) State(context.Context, *controlpb.StateRequest) (*controlpb.StateReply, error) {
	reply := &controlpb.StateReply{Counters: map[string]uint64{}}
	c.mu.Lock()
	for _, s := range c.sessions {
		sent, received := s.counters()
		role := controlpb.Role_SERVER
		if s.Role == Client {
			role = controlpb.Role_CLIENT
		}
		reply.Sessions = append(reply.Sessions, &controlpb.SessionState{
			SessionId: s.ID, Role: role, Service: s.Service, Label: s.Label, LinkUp: s.LinkUp(),
			Sent: streamCounters(sent), Received: streamCounters(received),
		})
		reply.Queues = append(reply.Queues, s.queues()...)
	}
	c.mu.Unlock()
	sort.Slice(reply.Sessions, func(i, j int) bool { return reply.Sessions[i].SessionId < reply.Sessions[j].SessionId })
	c.counterMu.Lock()
	for name, ctr := range c.counters {
		reply.Counters[name] = ctr.Load()
	}
	for hop, depth := range c.queues {
		reply.Queues = append(reply.Queues, queueDepth(hop, depth()))
	}
	c.counterMu.Unlock()
	sort.Slice(reply.Queues, func(i, j int) bool { return reply.Queues[i].Hop < reply.Queues[j].Hop })
	return reply, nil
}

func queueDepth(hop string, d netdev.Depth) *controlpb.QueueDepth {
	return &controlpb.QueueDepth{Hop: hop, Frames: d.Frames, Bytes: d.Bytes, SojournNs: int64(d.Sojourn)}
}

func streamCounters(c *packetstream.Counters) *controlpb.StreamCounters {
	if c == nil {
		return &controlpb.StreamCounters{}
	}
	return &controlpb.StreamCounters{
		Frames: c.Frames.Load(), Bytes: c.Bytes.Load(), Drops: c.Invalid.Load(),
		SignalsSent: c.SignalsSent.Load(), SignalsReceived: c.SignalsReceived.Load(),
	}
}

// Heartbeat takes the handler lock, so a component stuck in its handler misses beats.
func (c *Component) Heartbeat(_ context.Context, req *controlpb.HeartbeatRequest) (*controlpb.HeartbeatReply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &controlpb.HeartbeatReply{Seq: req.GetSeq()}, nil
}

// Exit ends the component on its own with exit value code, as a Genode component calls
// env.parent().exit(code): every session is closed and the handler stopped, as by the
// supervisor's Stop, and the process exits with code, which the supervisor reads as the
// child's exit value. It returns at once (the ending runs on its own goroutine), so a handler
// may call it from anywhere, its own calls and goroutines included.
func (c *Component) Exit(code int) {
	c.exitValue.Store(int32(code))
	c.exiting.Store(true)
	go c.Stop(context.Background(), nil)
}

// Exited is closed once the component has ended, by the supervisor's Stop or by Exit.
func (c *Component) Exited() <-chan struct{} { return c.stopped }

// ExitValue is the exit value Exit gave (0 when it was not called).
func (c *Component) ExitValue() int { return int(c.exitValue.Load()) }

// Stop closes every session, stops the handler, ends the captures and the process's gRPC
// server, so Main returns.
func (c *Component) Stop(context.Context, *controlpb.StopRequest) (*controlpb.Empty, error) {
	c.mu.Lock()
	if c.h != nil {
		for _, s := range c.sessions {
			c.close(s)
		}
		c.h.Stop()
		c.h = nil
	}
	for id := range c.captures {
		c.stopCapture(id)
	}
	c.mu.Unlock()
	c.stopOnce.Do(func() { close(c.stopped) })
	return &controlpb.Empty{}, nil
}
