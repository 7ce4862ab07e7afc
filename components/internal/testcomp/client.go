package testcomp

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Client requests one session and keeps a window of numbered frames in flight through it,
// checking every reply. Its counters tell tests what happened: "sent", "received",
// "mismatches" (corrupted replies), "late" (replies to a window given up as lost), "link_ups",
// "link_downs", "peer_link" (the link state its server reports, 1 for up), "first_reply_unix_ns", the wall-clock time of
// the first reply after the session last came up, "device_rounds" (exchanges over a device
// session) and "denied" (requests the supervisor refused).
type Client struct {
	c         *component.Component
	requested bool
	cfg       clientConfig
	l         *loop
	device    *device
	wire      *wire

	sent, received, mismatches, late, linkUps, linkDowns, peerLink, firstReply, deviceRounds, denied *atomic.Uint64
}

type clientConfig struct {
	window    int
	size      int
	interval  time.Duration
	count     uint64 // replies after which it exits; 0: never
	exitValue int
}

// NewClient returns the client handler; it requests its session when first configured.
func NewClient(c *component.Component) *Client {
	return &Client{c: c,
		sent: c.Counter("sent"), received: c.Counter("received"), mismatches: c.Counter("mismatches"), late: c.Counter("late"),
		linkUps: c.Counter("link_ups"), linkDowns: c.Counter("link_downs"), peerLink: c.Counter("peer_link"), firstReply: c.Counter("first_reply_unix_ns"),
		deviceRounds: c.Counter("device_rounds"), denied: c.Counter("denied"),
	}
}

func (cl *Client) Configure(typed any) error {
	cfg, err := component.ConfigOf[*config.Node](typed)
	if err != nil {
		return err
	}
	if errs := config.Check(cfg, ClientSchema); len(errs) > 0 {
		cl.c.Log.Warn("config", "err", errs[0])
	}
	num := func(name string, def uint64) (int, error) {
		v, err := cfg.Number(name, def)
		if err == nil && (v == 0 || v > 1<<30) {
			a, _ := cfg.Attr(name)
			err = config.Errorf(a.Pos, "%s=%d is out of range", name, v)
		}
		return int(v), err
	}
	var cc clientConfig
	if cc.window, err = num("window", 8); err != nil {
		return err
	}
	if cc.size, err = num("size", 256); err != nil {
		return err
	}
	if cc.size < 8 {
		return fmt.Errorf("size=%d: frames carry an 8-byte sequence number", cc.size)
	}
	us, err := num("interval_us", 1000)
	if err != nil {
		return err
	}
	cc.interval = time.Duration(us) * time.Microsecond
	if cc.count, err = cfg.Number("count", 0); err != nil {
		return err
	}
	exitValue, err := strconv.ParseInt(cfg.String("exit_value", "0"), 10, 32)
	if err != nil {
		a, _ := cfg.Attr("exit_value")
		return config.Errorf(a.Pos, "exit_value=%q is not a number", a.Value)
	}
	cc.exitValue = int(exitValue)
	if cl.requested {
		return nil // the running session keeps its geometry
	}
	stream := packetstream.Config{}
	if stream.QueueSize, err = num("queue_size", 64); err != nil {
		return err
	}
	if stream.BulkSize, err = num("bulk_size", 64*packetstream.BlockSize); err != nil {
		return err
	}
	device, err := cfg.Bool("device", false)
	if err != nil {
		return err
	}
	cl.cfg, cl.requested = cc, true
	if svc := cfg.String("service", "Nic"); svc == "Tap" || svc == "Packet" {
		args := map[string]string{}
		for _, a := range []string{"netns", "address", "gateway", "mtu", "offload", "exec"} {
			if v, ok := cfg.Attr(a); ok {
				args[a] = v.Value
			}
		}
		cl.c.RequestDevice(svc, cfg.String("label", ""), args, component.DeviceSpec{})
		return nil
	}
	if device {
		cl.c.RequestDevice(cfg.String("service", "Nic"), cfg.String("label", ""), nil, DeviceSpec)
		return nil
	}
	cl.c.Request(cfg.String("service", "Nic"), cfg.String("label", ""), nil, stream, stream)
	return nil
}

func (cl *Client) Open(s *component.Session) error {
	if s.Device() {
		use := cl.useDevice
		if s.Service == "Tap" || s.Service == "Packet" {
			use = cl.openWire
		}
		if err := use(s); err != nil {
			return err
		}
		cl.linkUps.Add(1)
		return nil
	}
	l, err := startLoop(func(stop *atomic.Bool, w *packetstream.Waiter) { cl.run(s.Client, stop, w) }, s.Client.TX, s.Client.RX)
	if err != nil {
		return err
	}
	cl.l = l
	cl.linkUps.Add(1)
	cl.peerLink.Store(1)
	cl.c.Log.Info("link up", "session", s.ID, "label", s.Label)
	return nil
}

// Link records the link state the server reports.
func (cl *Client) Link(s *component.Session, up bool) {
	v := uint64(0)
	if up {
		v = 1
	}
	cl.peerLink.Store(v)
	cl.c.Log.Info("server reports link", "session", s.ID, "up", up)
}

// Denied counts refusals; the supervisor has logged the reason.
func (cl *Client) Denied(uint64, string) { cl.denied.Add(1) }

func (cl *Client) Close(s *component.Session) {
	cl.Stop()
	cl.linkDowns.Add(1)
	cl.c.Log.Info("link down", "session", s.ID)
}

// Stop ends the session's loop, device or wire, whichever runs.
func (cl *Client) Stop() {
	if cl.l != nil {
		cl.l.stop()
		cl.l = nil
	}
	if cl.device != nil {
		cl.device.close()
		cl.device = nil
	}
	if cl.wire != nil {
		cl.wire.close()
		cl.wire = nil
	}
}

// lostAfter is how long the client waits for a reply before it counts its frames as lost and
// sends a new window.
const lostAfter = 200 * time.Millisecond

func (cl *Client) run(c *packetstream.Client, stop *atomic.Bool, w *packetstream.Waiter) {
	cfg := cl.cfg
	var seq, expect uint64
	first := true
	last := time.Now()
	next := time.Now()
	for !stop.Load() {
		for {
			p, ok := c.TX.GetAcked()
			if !ok {
				break
			}
			c.TX.Release(p)
		}
		for c.RX.CanAck() {
			p, ok := c.RX.TryGet()
			if !ok {
				break
			}
			if in := c.RX.Payload(p); in != nil {
				got := binary.LittleEndian.Uint64(in)
				switch {
				case !validFrame(in):
					cl.mismatches.Add(1)
				case got < expect:
					cl.late.Add(1) // from a window given up as lost
				default:
					expect = got + 1
					if n := cl.received.Add(1); n == cfg.count {
						cl.c.Log.Info(fmt.Sprintf("received %d replies", n))
						cl.c.Exit(cfg.exitValue)
					}
					if first {
						cl.firstReply.Store(uint64(time.Now().UnixNano()))
						first = false
					}
				}
			}
			c.RX.TryAck(p)
			last = time.Now()
		}
		now := time.Now()
		if seq-expect >= uint64(cfg.window) && now.Sub(last) > lostAfter {
			cl.c.Log.Warn("no reply; giving the window up", "waited", now.Sub(last), "unacked", c.TX.InFlight(), "replies_waiting", c.RX.PacketAvail(), "seq", seq)
			expect, last = seq, now // the window was lost (its server went away): start anew
		}
		for seq-expect < uint64(cfg.window) && !now.Before(next) {
			p, err := c.TX.Alloc(cfg.size)
			if err != nil {
				break
			}
			fillFrame(c.TX.Payload(p), seq)
			if !c.TX.TrySubmit(p) {
				c.TX.Release(p)
				break
			}
			seq++
			cl.sent.Add(1)
			if seq%uint64(cfg.window) == 0 {
				next = now.Add(cfg.interval)
			}
		}
		c.TX.Wakeup()
		c.RX.Wakeup()
		if seq-expect < uint64(cfg.window) {
			w.WaitUntil(next) // time to send more
		} else {
			w.WaitUntil(last.Add(lostAfter)) // replies, or give the window up
		}
	}
}

// fillFrame writes seq and a pattern derived from it, so a corrupted reply shows.
func fillFrame(b []byte, seq uint64) {
	binary.LittleEndian.PutUint64(b, seq)
	for i := 8; i < len(b); i++ {
		b[i] = byte(seq) + byte(i)
	}
}

func validFrame(b []byte) bool {
	if len(b) < 8 {
		return false
	}
	seq := binary.LittleEndian.Uint64(b)
	for i := 8; i < len(b); i++ {
		if b[i] != byte(seq)+byte(i) {
			return false
		}
	}
	return true
}
