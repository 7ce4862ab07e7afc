// Package testcomp holds the two test components' logic: an echo server that reflects every
// frame of the sessions routed to it, and a client that sends numbered frames and checks what
// comes back. They prove the component runtime and the supervisor end to end.
package testcomp

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// EchoSchema is test_echo's config: tag is any number, shown as the counter "tag" so tests
// see a live config change arrive; link (yes/no) is the link state it reports to its clients;
// open_delay_ms makes it answer each OpenSession that much later (after reporting a link
// down), as a slow component would. Device sessions (DeviceSpec) routed to it are served as
// the test device.
var EchoSchema = &config.Schema{Type: "config", Attrs: []string{"tag", "service", "link", "open_delay_ms"}}

// ClientSchema is test_client's config.
// device="yes" requests a device session (DeviceSpec) instead of a packet stream; service
// "Tap" or "Packet" requests that parent service with the attributes of the same names as its
// arguments, and reflects the UDP datagrams it carries. count="N" makes it log "received N
// replies" after the Nth reply and exit with exit_value (0).
var ClientSchema = &config.Schema{Type: "config", Attrs: []string{"service", "label", "window", "size", "interval_us", "queue_size", "bulk_size", "device",
	"netns", "address", "gateway", "mtu", "offload", "exec", "count", "exit_value"}}

// Echo serves sessions by sending every frame back.
type Echo struct {
	log     *slog.Logger
	tag     *atomic.Uint64
	configs *atomic.Uint64
	drops   *atomic.Uint64
	loops   map[uint64]*loop
	devices map[uint64]*device
	link    bool
	delay   time.Duration // before answering OpenSession
	// c is the component, for announcing the service and reporting link state.
	c *component.Component
}

// NewEcho returns the echo handler; it announces service (from <config service>, default
// "Nic") when first configured.
func NewEcho(c *component.Component) *Echo {
	return &Echo{log: c.Log, tag: c.Counter("tag"), configs: c.Counter("configs"), drops: c.Counter("echo_drops"), loops: map[uint64]*loop{}, devices: map[uint64]*device{}, c: c}
}

func (e *Echo) Configure(typed any) error {
	cfg, err := component.ConfigOf[*config.Node](typed)
	if err != nil {
		return err
	}
	if errs := config.Check(cfg, EchoSchema); len(errs) > 0 {
		e.log.Warn("config", "err", errs[0])
	}
	tag, err := cfg.Number("tag", 0)
	if err != nil {
		return err
	}
	link, err := cfg.Bool("link", true)
	if err != nil {
		return err
	}
	delay, err := cfg.Number("open_delay_ms", 0)
	if err != nil {
		return err
	}
	if e.configs.Add(1) == 1 {
		e.c.Announce(cfg.String("service", "Nic"))
	} else if link != e.link {
		for _, l := range e.loops {
			e.c.ReportLink(l.session, link)
		}
	}
	e.tag.Store(tag)
	e.link, e.delay = link, time.Duration(delay)*time.Millisecond
	return nil
}

func (e *Echo) Open(s *component.Session) error {
	if s.Device() {
		return e.serveDevice(s)
	}
	l, err := startLoop(func(stop *atomic.Bool, w *packetstream.Waiter) { e.serve(s.Server, stop, w) }, s.Server.TX, s.Server.RX)
	if err != nil {
		return err
	}
	l.session = s
	e.loops[s.ID] = l
	if !e.link {
		e.c.ReportLink(s, false)
	}
	time.Sleep(e.delay)
	e.log.Info("session opened", "id", s.ID, "label", s.Label)
	return nil
}

func (e *Echo) Close(s *component.Session) {
	if l := e.loops[s.ID]; l != nil {
		l.stop()
		delete(e.loops, s.ID)
	}
	if d := e.devices[s.ID]; d != nil {
		d.close()
		delete(e.devices, s.ID)
	}
}

// batch bounds the frames handled per wakeup, as Genode's max_packets_per_signal does.
const batch = 64

func (e *Echo) serve(srv *packetstream.Server, stop *atomic.Bool, w *packetstream.Waiter) {
	for !stop.Load() {
		for {
			p, ok := srv.RX.GetAcked()
			if !ok {
				break
			}
			srv.RX.Release(p)
		}
		n := 0
		for ; n < batch && srv.TX.CanAck(); n++ {
			p, ok := srv.TX.TryGet()
			if !ok {
				break
			}
			if in := srv.TX.Payload(p); in != nil {
				if q, err := srv.RX.Alloc(len(in)); err != nil {
					e.drops.Add(1)
				} else if copy(srv.RX.Payload(q), in); !srv.RX.TrySubmit(q) {
					srv.RX.Release(q)
					e.drops.Add(1)
				}
			}
			srv.TX.TryAck(p)
		}
		srv.TX.Wakeup()
		srv.RX.Wakeup()
		if n == 0 {
			w.Wait()
		}
	}
}

// loop is one session's goroutine, stopped before the session is unmapped.
type loop struct {
	session *component.Session
	halt    atomic.Bool
	w       *packetstream.Waiter
	done    sync.WaitGroup
}

func startLoop(run func(*atomic.Bool, *packetstream.Waiter), eps ...packetstream.Endpoint) (*loop, error) {
	w, err := packetstream.NewWaiter(eps...)
	if err != nil {
		return nil, err
	}
	l := &loop{w: w}
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		run(&l.halt, w)
	}()
	return l, nil
}

func (l *loop) stop() {
	l.halt.Store(true)
	l.w.Wake()
	l.done.Wait()
	l.w.Close()
}

// Stop ends what sessions still run (Component.Stop closed them all first, so normally none).
func (e *Echo) Stop() {
	for id, l := range e.loops {
		l.stop()
		delete(e.loops, id)
	}
	for id, d := range e.devices {
		d.close()
		delete(e.devices, id)
	}
}
