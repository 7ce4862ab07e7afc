package guests

import (
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/components/internal/guest"
	"github.com/nicstack/nicstack/drivers/vhostuser"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/nicbridge"
	ps "github.com/nicstack/nicstack/runtime/packetstream"
)

// VhostUser is the vhost-user guest: a VM whose QEMU (-netdev vhost-user, guest memory
// shared) connects to the Unix socket the supervisor listens on for this component, its
// virtio-net device served by drivers/vhostuser and bound to a Nic session of the router
// through nicbridge, as the netns guest binds its TAP. One front end at a time: each
// connection gets a fresh device, and a new connection ends the old one, so a QEMU that
// was killed and starts again gets a fresh session.
//
// With queues="N" the device offers N queue pairs; each pair's transmit queue has a reader
// of its own, a goroutine on a locked thread the supervisor pins to one of the component's
// cpus (pair p on the p-th, round; see pin), feeding the one Nic session a burst at a time;
// the session's frames go to the guest through one writer that steers each flow to a pair
// (drivers/vhostuser).
type VhostUser struct {
	c        *component.Component
	listen   func(path string) (*net.UnixListener, error)
	stats    *nicbridge.Stats
	vstats   *vhostuser.Stats
	ln       *net.UnixListener
	served   sync.WaitGroup
	queues   int         // queue pairs offered
	unpinned atomic.Bool // pinning failed once: said so

	mu       sync.Mutex
	stopping bool
	dev      *vhostuser.Device // the connection being served
	nic      *nicbridge.NIC
	nicSes   *ps.Client // the open Nic session, attached to each connection's NIC
}

// NewVhostUser returns the handler; listen hands it the socket its config names
// (component.Listener, or a test's).
func NewVhostUser(c *component.Component, listen func(string) (*net.UnixListener, error)) *VhostUser {
	return &VhostUser{c: c, listen: listen, stats: nicbridge.NewStats(c.Counter), vstats: vhostuser.NewStats(c.Counter)}
}

func (g *VhostUser) Configure(typed any) error {
	if g.ln == nil {
		cfg, err := component.ConfigOf[guest.Config](typed)
		if err != nil {
			return err
		}
		g.queues = cfg.Queues
	}
	return configureSocketGuest(g.c, typed, g.listen, &g.ln, &g.served, g.accept)
}

// keptConnection is the key under which the supervisor holds the served connection's state
// (component.Keep): a vm killed by a signal or a crash is started again, resumes the
// connection and the front end never sees it end (docs/vms.md).
const keptConnection = 1

// accept serves front ends until the socket is closed; a new one ends the one before. A
// connection the process before this one served, kept by the supervisor, is resumed first.
func (g *VhostUser) accept() {
	defer g.served.Done()
	var ended chan struct{}
	record, files, err := component.Kept(keptConnection)
	var dev *vhostuser.Device
	if err == nil && files != nil {
		dev, err = vhostuser.Resume(record, files, g.c.Log, g.vstats)
	}
	if err != nil {
		g.c.Log.Warn("the kept front end's connection cannot be resumed; it ends", "err", err)
		g.keep(nil, nil)
	} else if dev != nil {
		g.c.Log.Info("front end's connection resumed")
		ended = g.start(dev, nil)
	}
	for {
		dev, err := vhostuser.Accept(g.ln, g.c.Log, g.vstats)
		if err != nil {
			return // closed by Stop
		}
		dev.SetQueuePairs(g.queues) // checked by the config
		ended = g.start(dev, ended)
	}
}

// keep has the supervisor hold the connection's state (none: let it go, and the connection
// with it), logging a failure: the connection then only ends with this process.
func (g *VhostUser) keep(record []byte, fds []int) {
	if err := g.c.Keep(keptConnection, record, fds); err != nil {
		g.c.Log.Warn("the supervisor does not hold the front end's connection", "err", err)
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// start serves dev once the connection before it (ended) is let go, and returns the channel
// closed when dev's connection has ended.
func (g *VhostUser) start(dev *vhostuser.Device, ended chan struct{}) chan struct{} {
	g.mu.Lock()
	if g.dev != nil {
		g.dev.Close()
		g.c.Log.Info("a new front end replaces the connected one")
	}
	if g.stopping {
		dev.Close()
	}
	g.dev = dev
	g.mu.Unlock()
	if ended != nil {
		<-ended
	}
	ended = make(chan struct{})
	g.served.Add(1)
	go g.run(dev, ended)
	return ended
}

// run serves one front end until its connection ends.
func (g *VhostUser) run(dev *vhostuser.Device, ended chan struct{}) {
	defer g.served.Done()
	defer close(ended)
	nic := nicbridge.New(dev, g.stats)
	g.mu.Lock()
	g.nic = nic
	if g.nicSes != nil {
		if err := nic.Attach(g.nicSes); err != nil {
			g.c.Log.Warn("attaching the Nic session", "err", err)
		}
	}
	g.mu.Unlock()
	g.c.Log.Info("front end connected", "connection", g.vstats.Sessions.Load(), "queue_pairs", dev.QueuePairs())
	dev.SetKeeper(g.keep)
	go func() {
		if err := dev.Serve(); err != nil {
			g.c.Log.Warn("front end refused; its connection ends", "err", err)
		}
	}()
	var readers sync.WaitGroup
	for p := 1; p < dev.QueuePairs(); p++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			g.pin(p)
			nic.RunReader(dev.Pair(p), nil)
		}()
	}
	g.pin(0)
	nic.Run(nil) // until the connection ends: Read returns ErrClosed
	readers.Wait()
	<-dev.Done()
	g.keep(nil, nil) // the front end must see the end
	g.mu.Lock()
	nic.Detach()
	g.nic = nil
	if g.dev == dev {
		g.dev = nil
	}
	g.mu.Unlock()
	g.c.Log.Info("front end disconnected")
}

// pin locks the calling goroutine to its thread and has the supervisor bind that thread to
// pair p's cpu, the p-th of the component's (component.PinThread: the sandbox refuses
// sched_setaffinity), with more than one pair. Should that fail, the readers run unpinned,
// which one line says.
func (g *VhostUser) pin(p int) {
	if g.queues == 1 {
		return
	}
	runtime.LockOSThread()
	if err := g.c.PinThread(p); err != nil && !g.unpinned.Swap(true) {
		g.c.Log.Info("the queue pairs' readers run unpinned", "err", err)
	}
}

func (g *VhostUser) Open(s *component.Session) error {
	if s.Client == nil {
		return fmt.Errorf("session %d (%s): the vhost-user guest serves no sessions", s.ID, s.Service)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nicSes = s.Client
	g.c.Log.Info("link up", "session", s.ID, "label", s.Label)
	if g.nic != nil {
		return g.nic.Attach(s.Client)
	}
	return nil
}

func (g *VhostUser) Close(s *component.Session) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.nic != nil {
		g.nic.Detach()
	}
	g.nicSes = nil
	g.c.Log.Info("link down", "session", s.ID)
}

// Stop closes the socket and the front end's connection and waits for their goroutines.
func (g *VhostUser) Stop() {
	if g.ln == nil {
		return
	}
	g.ln.Close()
	g.mu.Lock()
	g.stopping = true
	if g.dev != nil {
		g.dev.Close()
	}
	g.mu.Unlock()
	g.served.Wait()
}
