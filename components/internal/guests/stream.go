package guests

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/nicstack/nicstack/components/internal/guest"
	"github.com/nicstack/nicstack/components/internal/netstack"
	"github.com/nicstack/nicstack/drivers/ipxe"
	"github.com/nicstack/nicstack/drivers/qemustream"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/runtime/component"
)

// Stream is the stream guest: a real VM, a QEMU with `-netdev stream` (passt's protocol) on
// the Unix socket the supervisor listens on for this component, bound to a Nic session of the
// router like any guest. One peer at a time: a new connection ends the old one, so a QEMU that
// restarts gets a fresh session. QEMU's stream carries no offload metadata, so what the router
// hands over with some (a partial checksum, a TCP super-frame) is completed and cut here as a
// NIC without the features would (ipxe.SoftOffload).
type Stream struct {
	c      *component.Component
	listen func(path string) (*net.UnixListener, error)
	ln     *net.UnixListener
	port   atomic.Pointer[Port]
	conn   atomic.Pointer[net.UnixConn]
	served sync.WaitGroup

	mu   sync.Mutex // one batch to the peer at a time
	w    *qemustream.Writer
	soft *ipxe.SoftOffload

	connections, resets, rxFrames, txFrames, txDropped *atomic.Uint64
}

// streamBuffer is the read buffer: many frames of a burst per read.
const streamBuffer = 1 << 20

// NewStream returns the handler; listen hands it the socket its config names
// (component.Listener, or a test's).
func NewStream(c *component.Component, listen func(string) (*net.UnixListener, error)) *Stream {
	return &Stream{c: c, listen: listen, soft: ipxe.NewSoftOffload(ipxe.NewCounters(c.Counter)),
		connections: c.Counter("stream_connections"), resets: c.Counter("stream_resets"),
		rxFrames: c.Counter("stream_rx_frames"), txFrames: c.Counter("stream_tx_frames"), txDropped: c.Counter("stream_tx_dropped")}
}

func (g *Stream) Configure(typed any) error {
	return configureSocketGuest(g.c, typed, g.listen, &g.ln, &g.served, g.accept)
}

// configureSocketGuest configures a guest on a socket (stream, vhost-user) once: it takes
// the socket its config names into *ln, requests the Nic session and starts accept, which
// calls served.Done when the socket closes. A later config is kept for the next life.
func configureSocketGuest(c *component.Component, typed any, listen func(string) (*net.UnixListener, error),
	ln **net.UnixListener, served *sync.WaitGroup, accept func()) error {
	if *ln != nil {
		c.Log.Warn("config changed: the guest keeps its config until it restarts")
		return nil
	}
	cfg, err := component.ConfigOf[guest.Config](typed)
	if err != nil {
		return err
	}
	if *ln, err = listen(cfg.Socket); err != nil {
		return err
	}
	c.Request(cfg.Session, cfg.Label, sessionArgs(cfg), tapStream, tapStream)
	c.Log.Info(cfg.Guest+" guest", "socket", cfg.Socket)
	served.Add(1)
	go accept()
	return nil
}

func (g *Stream) accept() {
	defer g.served.Done()
	for {
		conn, err := g.ln.AcceptUnix()
		if err != nil {
			return // closed by Stop
		}
		if old := g.conn.Swap(conn); old != nil {
			old.Close()
			g.c.Log.Info("a new peer replaces the connected one")
		}
		g.connections.Add(1)
		g.c.Log.Info("peer connected", "connection", g.connections.Load())
		g.served.Add(1)
		go g.serve(conn)
	}
}

// serve moves the peer's frames to the session, every whole frame of a read in one batch.
func (g *Stream) serve(conn *net.UnixConn) {
	defer g.served.Done()
	rd := qemustream.NewReader(conn, streamBuffer)
	var raw [][]byte
	var frames []netstack.Frame
	for {
		var err error
		raw, err = rd.ReadFrames(raw[:0])
		frames = frames[:0]
		for _, f := range raw {
			frames = append(frames, netstack.Frame{Data: f})
		}
		if p := g.port.Load(); p != nil && len(frames) > 0 {
			g.rxFrames.Add(uint64(p.WriteFrames(frames)))
		}
		if err == nil {
			continue
		}
		var bad *qemustream.MalformedError
		switch {
		case errors.As(err, &bad):
			g.resets.Add(1)
			g.c.Log.Warn("peer sent a malformed frame; its session is reset", "err", err)
		case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
			g.c.Log.Info("peer disconnected")
		default:
			g.c.Log.Info("peer connection ended", "err", err)
		}
		if g.conn.CompareAndSwap(conn, nil) {
			conn.Close()
		}
		return
	}
}

// deliver writes a batch of the session's frames to the peer with one write.
func (g *Stream) deliver(frames []netstack.Frame) {
	g.mu.Lock()
	defer g.mu.Unlock()
	conn := g.conn.Load()
	if conn == nil {
		g.txDropped.Add(uint64(len(frames)))
		return // no peer: as a cable pulled out
	}
	if g.w == nil {
		g.w = qemustream.NewWriter()
	}
	for _, f := range frames {
		if f.Offload == (netdev.Offload{}) {
			copy(g.w.Frame(len(f.Data)), f.Data)
			continue
		}
		room := g.w.Frame(qemustream.MaxStreamFrame)
		n := g.soft.Copy(room, f.Data, f.Offload)
		for n <= len(room) {
			g.w.Shrink(room, n)
			if !g.soft.Pending() {
				break
			}
			room = g.w.Frame(qemustream.MaxStreamFrame)
			n = g.soft.Next(room)
		}
		if n > len(room) {
			g.w.Shrink(room, 0)
			g.txDropped.Add(1)
		}
	}
	if err := g.w.Flush(conn); err != nil {
		g.c.Log.Info("writing to the peer", "err", err)
		if g.conn.CompareAndSwap(conn, nil) {
			conn.Close()
		}
		return
	}
	g.txFrames.Add(uint64(len(frames)))
}

func (g *Stream) Open(s *component.Session) error {
	if s.Client == nil {
		return fmt.Errorf("session %d (%s): the stream guest serves no sessions", s.ID, s.Service)
	}
	p, err := NewPort(s.Client.TX, s.Client.RX, g.deliver)
	if err != nil {
		return err
	}
	if old := g.port.Swap(p); old != nil {
		old.Close()
	}
	g.c.Log.Info("link up", "session", s.ID, "label", s.Label)
	return nil
}

func (g *Stream) Close(s *component.Session) {
	if p := g.port.Swap(nil); p != nil {
		p.Close()
	}
	g.c.Log.Info("link down", "session", s.ID)
}

// Stop closes the socket and the peer's connection and waits for their goroutines.
func (g *Stream) Stop() {
	if g.ln != nil {
		g.ln.Close()
	}
	if c := g.conn.Swap(nil); c != nil {
		c.Close()
	}
	g.served.Wait()
	if p := g.port.Swap(nil); p != nil {
		p.Close()
	}
}
