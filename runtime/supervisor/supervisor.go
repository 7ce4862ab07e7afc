// Package supervisor is nicstack's init: it reads a scenario (Genode's init config), starts
// each <start> as a component process pinned to its CPUs, routes the sessions components
// request, hands them the session files, and keeps everything running. It makes no device
// itself: the services it serves at <parent/> are handed in (Options.ParentServices; package
// internal/hostservice has Linux's Tap and Packet).
package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nicstack/nicstack/runtime/leftover"

	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/netns"
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
	// RunAs is whom components run as when the supervisor is root: RunAsDynamic (the
	// default, "": each its own uid), a user name or uid (all as that user), or RunAsRoot.
	RunAs string
	// StateDir is the folder where the run keeps what outlives it: its attachments (a named
	// run's instance folder). "": attachments last as long as the run.
	StateDir string
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
	file     *config.Node // the scenario file's init config, as last read: sc without the attachments
	attached []Attachment // in the order they came (attach.go)
	children map[string]*child
	requests map[reqKey]*request
	nextID   uint64
	stopping bool
	exit     *PropagatedExit // a child's exit value ends the run (<exit propagate>)

	nsMu       sync.Mutex // namespaces is read by Netns callers outside the supervisor goroutine
	namespaces map[string]*netns.NS
	// controlSocket is the socket ServeControl serves on, kept in the run's record.
	controlSocket string
	ids           *identities             // whom each child runs as
	sockets       map[string]*boundSocket // by start name and the socket's name
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
	ids, err := newIdentities(opts.RunAs)
	if err != nil {
		return nil, err
	}
	s := &Supervisor{
		path: path, opts: opts, log: opts.Out.Logger(opts.Verbose), topo: topo,
		events: make(chan func(), 64), done: make(chan struct{}), quitting: make(chan struct{}),
		sc: sc, file: sc.Root, children: map[string]*child{}, requests: map[reqKey]*request{},
		namespaces: map[string]*netns.NS{}, ids: ids, sockets: map[string]*boundSocket{},
	}
	for _, st := range sc.Starts {
		if _, err := s.binary(st); err != nil {
			return nil, err
		}
	}
	s.warnUnknown(sc)
	s.checkConfigs(sc, nil)
	if err := s.restoreAttachments(); err != nil {
		return nil, err
	}
	return s, nil
}

// warnUnknown logs the nodes and attributes init does not know, Genode's warnings: errors for
// `nicstack check`, warnings at run time, as in Genode (the file may be fixed while the run
// goes on). What nicstack accepts and ignores shows with -v.
func (s *Supervisor) warnUnknown(sc *Scenario) {
	for _, e := range config.Check(sc.Root, Schema) {
		s.log.Warn(e.Error())
	}
	for _, e := range sc.Warnings {
		s.log.Warn(e.Error())
	}
	for _, e := range Ignored(sc) {
		s.log.Debug(e.Error())
	}
}

// checkConfigs checks each start's <config> against its component's Spec, once per scenario
// (the first, each reload and each attach or detach), and keeps the typed config that Check
// parsed for what the supervisor reads of it (files, sockets). What the Spec warns of or
// refuses is logged as a warning, as warnUnknown's are, unless the component logs its problems
// itself when it is configured; logged (nil: every start) picks whose. It returns what the
// Specs of the starts logged picks refuse.
func (s *Supervisor) checkConfigs(sc *Scenario, logged func(*Start) bool) (refused []error) {
	for _, st := range sc.Starts {
		if s.opts.Components == nil {
			break
		}
		if _, ok := programArgs(s.opts.Components, st); ok {
			continue
		}
		spec, err := s.opts.Components.Lookup(st.Binary)
		if err != nil {
			s.log.Warn(err.Error(), "child", st.Name)
			continue
		}
		var errs []error
		st.parsed, errs = checkStartConfig(spec, st)
		if logged != nil && !logged(st) {
			continue
		}
		if st.parsed == nil {
			refused = append(refused, errs...)
		}
		if spec.LogsWarnings {
			continue
		}
		for _, e := range errs {
			s.log.Warn(e.Error(), "child", st.Name)
		}
	}
	return refused
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

// binary finds a start's binary in the binary folders, a program's on PATH.
func (s *Supervisor) binary(st *Start) (string, error) {
	if _, ok := programArgs(s.opts.Components, st); ok {
		p, err := programPath(st.Binary, s.opts.BinDirs)
		if err != nil {
			return "", fmt.Errorf("%s: program %q of %q: %w", st.Node.Pos, st.Binary, st.Name, err)
		}
		return p, nil
	}
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

// maxRunDirLen bounds the run folder's path: go-plugin puts each component's socket there,
// in the folder of the component's uid when it runs as another user, as
// "plugin<up to 10 digits>", and a Unix socket's path holds at most 107 bytes. A longer one
// makes the component exit before its handshake.
const maxRunDirLen = 107 - len("/4294967295/plugin4294967295")

// Run starts every component and keeps them running until ctx ends, then stops them all and
// removes what the run created. A child with <exit propagate="yes"/> that exits ends the run
// too: Run then returns a *PropagatedExit with its exit value.
func (s *Supervisor) Run(ctx context.Context) error {
	defer close(s.done)
	runDir := s.opts.RunDir
	if runDir == "" {
		// os.TempDir, unless a long TMPDIR would make the sockets' paths too long, or
		// components running as other users could not reach their folders in it.
		base := ""
		if len(os.TempDir())+len("/"+runDirPrefix+"4194304-4294967295") > maxRunDirLen ||
			s.ids.drops() && !traversable(os.TempDir()) {
			base = "/tmp"
		}
		d, err := os.MkdirTemp(base, leftover.Named(runDirPrefix))
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
	if s.ids.drops() {
		// Others may pass through to the folder each component gets of its own.
		if err := os.Chmod(runDir, 0o711); err != nil {
			return err
		}
		if !traversable(runDir) {
			return fmt.Errorf("run folder %s: components run as their own users (RunAs %q) and cannot pass through a folder above it", runDir, s.opts.RunAs)
		}
	}
	if s.controlSocket != "" {
		os.WriteFile(filepath.Join(runDir, controlRecord), []byte(s.controlSocket), 0o600)
	}
	defer s.deleteNamespaces()
	defer s.closeSockets()

	if note := ScaleNote(s.sc.Space, s.topo); note != "" {
		s.log.Info("note: " + note)
	}
	for _, st := range s.sc.Starts {
		s.children[st.Name] = s.newChild(st)
		// Every socket first, so that a child that connects (QEMU) finds its peer's; an
		// error shows when that child launches.
		s.socketsOf(st)
	}
	for _, st := range s.sc.Starts {
		s.launch(s.children[st.Name])
	}
	// A netns guest's namespace that goes (its container ended) takes the guest with it.
	vanished := time.NewTicker(time.Second)
	defer vanished.Stop()
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
			if s.exit != nil {
				s.stopAll()
				return s.exit
			}
		case <-vanished.C:
			s.detachVanished()
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
