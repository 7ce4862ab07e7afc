package guests

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components/internal/guest"
	"github.com/nicstack/nicstack/components/internal/netstack"
	"github.com/nicstack/nicstack/drivers/qemustream"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// routerSide is the router's end of a heap session: what it receives, and a port to send.
type routerSide struct {
	mu     sync.Mutex
	frames [][]byte
	port   *Port
}

func (r *routerSide) deliver(fs []netstack.Frame) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range fs {
		r.frames = append(r.frames, bytes.Clone(f.Data))
	}
}

func (r *routerSide) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.frames)
}

func frame(n int, fill byte) []byte { return bytes.Repeat([]byte{fill}, n) }

// write sends frames to the guest as QEMU does, a batch in one write.
func write(t *testing.T, conn net.Conn, frames ...[]byte) {
	w := qemustream.NewWriter()
	for _, f := range frames {
		copy(w.Frame(len(f)), f)
	}
	if err := w.Flush(conn); err != nil {
		t.Fatal(err)
	}
}

// A peer speaking QEMU's stream protocol to the stream guest, without processes: frames go
// both ways in batches; a malformed length resets the peer's connection (logged, counted) and
// the guest goes on; a reconnecting peer gets a fresh connection; Stop leaves no goroutine.
func TestStreamGuest(t *testing.T) {
	before := runtime.NumGoroutine()
	path := filepath.Join(t.TempDir(), "vm.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	c := component.New(component.Spec{}, slog.New(slog.DiscardHandler), nil)
	g := NewStream(c, func(p string) (*net.UnixListener, error) {
		if p != "vm.sock" {
			t.Errorf("listener asked for %q", p)
		}
		return ln, nil
	})
	n, err := config.Parse("vm.hid", []byte("config | guest: stream | socket: vm.sock\n-\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := guest.ParseConfig(n, "vm")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	client, server, err := packetstream.NewHeapSession(packetstream.DefaultConfig(), packetstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	defer server.Close()
	if err := g.Open(&component.Session{ID: 1, Client: client}); err != nil {
		t.Fatal(err)
	}
	router := &routerSide{}
	if router.port, err = NewPort(server.RX, server.TX, router.deliver); err != nil {
		t.Fatal(err)
	}
	defer router.port.Close()

	peer := func() net.Conn {
		conn, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	conn := peer()
	write(t, conn, frame(60, 1), frame(1514, 2), frame(100, 3))
	waitFor(t, "three frames at the router", func() bool { return router.count() == 3 })
	// The router's frames reach the peer (once the guest saw the connection).
	waitFor(t, "the connection", func() bool { return g.connections.Load() == 1 })
	router.port.WriteFrames([]netstack.Frame{{Data: frame(64, 4)}, {Data: frame(1500, 5)}})
	rd := qemustream.NewReader(conn, 0)
	var got [][]byte
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(got) < 2 {
		fs, err := rd.ReadFrames(nil)
		got = append(got, fs...)
		if err != nil {
			t.Fatalf("reading the router's frames: %v (%d of 2)", err, len(got))
		}
	}
	if len(got[0]) != 64 || got[1][0] != 5 || len(got[1]) != 1500 {
		t.Fatalf("peer got frames of %d and %d bytes", len(got[0]), len(got[1]))
	}

	// A length no frame has: the connection is reset, the router got nothing of it.
	write(t, conn, frame(60, 6))
	conn.Write([]byte{0, 0, 0, 5, 1, 2, 3, 4, 5})
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Fatalf("the reset connection: %v, want EOF", err)
	}
	conn.Close()
	waitFor(t, "the frame before the bad length", func() bool { return router.count() == 4 })
	if g.resets.Load() != 1 {
		t.Fatalf("%d resets, want 1", g.resets.Load())
	}

	// A reconnecting peer gets a fresh connection.
	conn = peer()
	defer conn.Close()
	write(t, conn, frame(60, 7))
	waitFor(t, "the new peer's frame", func() bool { return router.count() == 5 })
	if g.connections.Load() != 2 {
		t.Fatalf("%d connections, want 2", g.connections.Load())
	}
	g.Close(&component.Session{ID: 1})
	router.port.Close()
	testutil.Stops(t, g.Stop, before+2) // the heap session's own
}
