package guests

import (
	"fmt"

	"github.com/nicstack/nicstack/components/internal/guest"
	"github.com/nicstack/nicstack/drivers/tap"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/nicbridge"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Netns is the netns guest: Linux's own stack in a namespace the supervisor makes, reached
// through a TAP with IFF_VNET_HDR (parent service "Tap"), bound to a Nic session of the
// router the way linux_nic binds a TAP to its Uplink (drivers/linuxnic: one burst per wakeup,
// super-frames whole with their offload metadata). The config's exec runs in the namespace.
type Netns struct {
	c      *component.Component
	cfg    guest.Config
	tapReq uint64
	dev    *tap.Device
	nic    *nicbridge.NIC
	ran    chan error
	nicSes *component.Session // the open Nic session, attached while the TAP is open
	stats  *nicbridge.Stats
}

// tapStream holds some 190 TSO super-frames of 64 KiB per direction (Genode's 1024 entries):
// at 12 Gbit/s that bridges an 8 ms stall of the guest's side, where 4 MiB made the router drop
// super-frames whenever the machine's two CPUs were contended (each a burst of 45 lost
// segments for TCP).
var tapStream = packetstream.Config{QueueSize: 1024, BulkSize: 12 << 20}

// NewNetns returns the handler.
func NewNetns(c *component.Component) *Netns {
	return &Netns{c: c, stats: nicbridge.NewStats(c.Counter)}
}

func (g *Netns) Configure(typed any) error {
	if g.tapReq != 0 {
		g.c.Log.Warn("config changed: the guest keeps its config until it restarts")
		return nil
	}
	cfg, err := component.ConfigOf[guest.Config](typed)
	if err != nil {
		return err
	}
	g.cfg = cfg
	g.tapReq = g.c.RequestDevice("Tap", "", cfg.TapArgs(), component.DeviceSpec{})
	g.c.Request(cfg.Session, cfg.Label, sessionArgs(cfg), tapStream, tapStream)
	g.c.Log.Info("netns guest", "config", cfg.String(), "netns", cfg.Netns, "address", cfg.TapAddress)
	return nil
}

func (g *Netns) Open(s *component.Session) error {
	switch {
	case s.Request == g.tapReq && s.Device():
		if len(s.Files) != 1 {
			return fmt.Errorf("Tap session: %d files, want 1", len(s.Files))
		}
		g.closeTap()
		dev, err := tap.FromFile(s.Files[0])
		if err != nil {
			return err
		}
		g.dev, g.nic = dev, nicbridge.New(dev, g.stats)
		g.nic.LimitFrames(nicbridge.TapFrameLimit(g.cfg.Offload, g.cfg.MTU))
		g.c.Log.Info("tap open", "interface", dev.Name(), "netns", g.cfg.Netns)
		if g.nicSes != nil {
			return g.attach(g.nicSes)
		}
	case s.Client != nil:
		g.nicSes = s
		g.c.Log.Info("link up", "session", s.ID, "label", s.Label)
		if g.nic != nil {
			return g.attach(s)
		}
	default:
		return fmt.Errorf("session %d (%s) answers no request of the netns guest", s.ID, s.Service)
	}
	return nil
}

func (g *Netns) Close(s *component.Session) {
	switch {
	case s.Request == g.tapReq && s.Device():
		g.closeTap()
	case s == g.nicSes:
		if g.nic != nil {
			g.nic.Detach()
		}
		g.nicSes = nil
		g.c.Log.Info("link down", "session", s.ID)
	}
}

// attach binds the TAP to the Nic session s and starts reading the TAP then, not before: what
// the namespace sent meanwhile (the first DHCP DISCOVER of the supervisor's lease client for a
// leased address) waits in the TAP's queue instead of being dropped for want of a session.
func (g *Netns) attach(s *component.Session) error {
	if err := g.nic.Attach(s.Client); err != nil {
		return err
	}
	if g.ran == nil {
		g.ran = make(chan error, 1)
		go func(nic *nicbridge.NIC, ran chan<- error) { ran <- nic.Run(nil) }(g.nic, g.ran)
	}
	return nil
}

func (g *Netns) closeTap() {
	if g.dev == nil {
		return
	}
	g.nic.Detach()
	g.dev.Close()
	if g.ran != nil {
		<-g.ran
	}
	g.dev, g.nic, g.ran = nil, nil, nil
	g.c.Log.Info("tap closed")
}

// Stop closes the TAP and ends the bridge's goroutines, should a session still hold them.
func (g *Netns) Stop() { g.closeTap() }
