package iperf

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/internal/testutil"
)

// stalling is the host's network with a path that goes dead: every connection after the
// first (the control connection) moves nothing once it sent its cookie, its reads and writes
// blocked until a deadline or Close, as behind a peer that vanished.
type stalling struct {
	Network
	dials atomic.Int32
}

func (s *stalling) DialContext(ctx context.Context, network, address string, o Options) (net.Conn, error) {
	c, err := s.Network.DialContext(ctx, network, address, o)
	if err != nil || s.dials.Add(1) == 1 {
		return c, err
	}
	return &stalledConn{Conn: c, wake: make(chan struct{})}, nil
}

func unwrap(c any) any {
	if s, ok := c.(*stalledConn); ok {
		return s.Conn
	}
	return c
}

func (s *stalling) Tune(c any, o Options) (Socket, error) { return s.Network.Tune(unwrap(c), o) }
func (s *stalling) TCPInfo(c net.Conn) (TCPInfo, error) {
	return s.Network.TCPInfo(unwrap(c).(net.Conn))
}

type stalledConn struct {
	net.Conn
	wake   chan struct{}
	once   sync.Once
	cookie bool // sent
}

func (c *stalledConn) Read([]byte) (int, error) { <-c.wake; return 0, os.ErrDeadlineExceeded }

func (c *stalledConn) Write(b []byte) (int, error) {
	if !c.cookie {
		c.cookie = true
		return c.Conn.Write(b)
	}
	<-c.wake
	return 0, os.ErrDeadlineExceeded
}
func (c *stalledConn) SetDeadline(time.Time) error {
	c.once.Do(func() { close(c.wake) })
	return nil
}

func (c *stalledConn) Close() error {
	c.SetDeadline(time.Time{})
	return c.Conn.Close()
}

// A client that receives (-R) and gets nothing for --rcv-timeout ends its test with iperf3's
// IENOMSG, in its report's JSON too, long before the test's time.
func TestClientRcvTimeout(t *testing.T) {
	port, reports := startServer(t, &Server{})
	c, err := ParseCommand(strings.Fields("-c 127.0.0.1 -R -t 30 -J --rcv-timeout 300 -p " + strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.ClientConfig(&stalling{Network: Kernel})
	var out bytes.Buffer
	cfg.Output = &out
	began := time.Now()
	rep, err := RunClient(context.Background(), cfg)
	if !errors.Is(err, &Error{Code: CodeNoMessage}) || !TimedOut(rep.Err) || err.Error() != "idle timeout for receiving data" {
		t.Fatalf("client: %v, want iperf3's idle timeout", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the client gave up after %v", took)
	}
	if !strings.Contains(out.String(), `"error": "idle timeout for receiving data"`) {
		t.Errorf("-J output:\n%s", out.String())
	}
	if r := <-reports; r.Error == "" {
		t.Error("the server's test ended without an error")
	}
}

// A server that receives and gets nothing for --rcv-timeout ends the test with IENOMSG and
// prints iperf3's line for it; it tells the client nothing, as iperf3's does not.
func TestServerRcvTimeout(t *testing.T) {
	text := &testutil.SyncBuffer{}
	port, reports := startServer(t, &Server{RcvTimeout: 300 * time.Millisecond, Output: text})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	client := make(chan error, 1)
	go func() {
		_, err := RunClient(ctx, ClientConfig{Network: &stalling{Network: Kernel}, Server: "127.0.0.1:" + strconv.Itoa(port), Duration: 30 * time.Second})
		client <- err
	}()
	defer func() { cancel(); <-client }()
	select {
	case r := <-reports:
		if r.Error != "idle timeout for receiving data" || !TimedOut(r.Err) {
			t.Fatalf("server's error %q", r.Error)
		}
	case <-ctx.Done():
		t.Fatal("the server waited on")
	}
	if !strings.Contains(text.String(), "iperf3: error - idle timeout for receiving data\n") {
		t.Errorf("server output:\n%s", text.String())
	}
}

// --snd-timeout is TCP_USER_TIMEOUT on a stream's socket.
func TestSndTimeoutSetsUserTimeout(t *testing.T) {
	ln, err := Kernel.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := Kernel.DialContext(context.Background(), "tcp", ln.Addr().String(), Options{UserTimeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, _ := c.(*net.TCPConn).SyscallConn()
	var ms int
	raw.Control(func(fd uintptr) { ms, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT) })
	if err != nil || ms != 1500 {
		t.Fatalf("TCP_USER_TIMEOUT %d ms, %v", ms, err)
	}
}
