package component

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/netdev"
	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

type recorder struct {
	configs []string
	opened  []*Session
	closed  []uint64
	stopped bool // Stop came, after every session was closed
}

func (r *recorder) Configure(cfg any) error {
	n, err := ConfigOf[*config.Node](cfg)
	if err != nil {
		return err
	}
	r.configs = append(r.configs, n.String("tag", ""))
	return nil
}
func (r *recorder) Open(s *Session) error { r.opened = append(r.opened, s); return nil }
func (r *recorder) Close(s *Session)      { r.closed = append(r.closed, s.ID) }
func (r *recorder) Stop()                 { r.stopped = len(r.opened) == len(r.closed) }

// socketPair returns the supervisor's and the component's ends of a control socket.
func socketPair(t *testing.T) (ours, theirs *net.UnixConn) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "control")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

func TestComponentSessions(t *testing.T) {
	ours, theirs := socketPair(t)
	rec := &recorder{}
	c := New(Spec{}, slog.New(slog.DiscardHandler), func(*Component) (Handler, error) { return rec, nil })
	go c.inbox.receive(theirs)
	ctx := context.Background()

	if _, err := c.Start(ctx, &controlpb.StartRequest{Name: "t", Config: &controlpb.Config{Text: `<config tag="1"/>`}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateConfig(ctx, &controlpb.Config{Text: "config | tag: 2\n-\n"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.UpdateConfig(ctx, &controlpb.Config{Text: `<config tag="3"`, Origin: "s.xml:7"})
	if err == nil || !strings.Contains(err.Error(), "s.xml:7") {
		t.Errorf("a broken config: %v, want an error naming its origin", err)
	}
	if strings.Join(rec.configs, ",") != "1,2" {
		t.Errorf("configs delivered: %v", rec.configs)
	}

	cfg := packetstream.Config{QueueSize: 16, BulkSize: 16 * packetstream.BlockSize}
	files, err := packetstream.NewSessionFiles("test", cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	if err := SendFiles(ours, 7, files.Files()); err != nil {
		t.Fatal(err)
	}
	size := &controlpb.StreamSize{QueueSize: 16, BulkSize: 16 * packetstream.BlockSize}
	// The route's bounds of bytes in flight: the server's applies to its RX stream (the one
	// it sends on), the client's TX bound is the client's.
	txSize := &controlpb.StreamSize{QueueSize: 16, BulkSize: 16 * packetstream.BlockSize, QueueBytes: 2000}
	rxSize := &controlpb.StreamSize{QueueSize: 16, BulkSize: 16 * packetstream.BlockSize, QueueBytes: 1000}
	req := &controlpb.OpenSessionRequest{SessionId: 7, Role: controlpb.Role_SERVER, Service: "Nic", Label: "c -> x", Tx: txSize, Rx: rxSize, Files: 6}
	if _, err := c.OpenSession(ctx, req); err != nil {
		t.Fatal(err)
	}
	if len(rec.opened) != 1 || rec.opened[0].Server == nil || rec.opened[0].Label != "c -> x" {
		t.Fatalf("opened: %+v", rec.opened)
	}
	if b := rec.opened[0].Server.RX.QueueBytes(); b != 1000 {
		t.Errorf("the server's RX stream bounded at %d bytes, want the request's 1000", b)
	}

	// A frame from the client side shows in the server's counters.
	client, err := packetstream.OpenClient(files)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p, _ := client.TX.Alloc(100)
	client.TX.TrySubmit(p)
	client.TX.Wakeup()
	srv := rec.opened[0].Server
	if _, ok := srv.TX.TryGet(); !ok {
		t.Fatal("no frame at the server")
	}
	srv.TX.Wakeup()
	c.Counter("interrupts").Add(3)
	// Two frames the server sends wait for the client: its RX stream's queue, beside a hop of
	// the component's own.
	for range 2 {
		p, _ := srv.RX.Alloc(60)
		srv.RX.TrySubmit(p)
	}
	srv.RX.Wakeup()
	c.Queue("ring", func() netdev.Depth { return netdev.Depth{Frames: 4, Bytes: 400, Sojourn: time.Millisecond} })
	c.Queue("gone", func() netdev.Depth { return netdev.Depth{} })
	c.Queue("gone", nil)
	st, err := c.State(ctx, &controlpb.StateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Sessions) != 1 || st.Sessions[0].Received.GetFrames() != 1 || st.Sessions[0].Received.GetBytes() != 100 || st.Counters["interrupts"] != 3 {
		t.Errorf("state: %v", st)
	}
	var queues []string
	for _, q := range st.Queues {
		queues = append(queues, fmt.Sprintf("%s %d/%d/%t", q.GetHop(), q.GetFrames(), q.GetBytes(), q.GetSojournNs() > 0))
	}
	if got, want := strings.Join(queues, ", "), "c -> x rx 2/120/true, c -> x rx acks 0/0/false, ring 4/400/true"; got != want {
		t.Errorf("queues: %s, want %s", got, want)
	}

	// Files that do not match the request are refused, not used.
	SendFiles(ours, 8, files.Files()[:3])
	if _, err := c.OpenSession(ctx, &controlpb.OpenSessionRequest{SessionId: 8, Role: controlpb.Role_CLIENT, Tx: size, Rx: size, Files: 6}); err == nil {
		t.Error("a session with 3 of 6 files opened")
	}

	c.CloseSession(ctx, &controlpb.CloseSessionRequest{SessionId: 7})
	if len(rec.closed) != 1 || rec.closed[0] != 7 {
		t.Errorf("closed: %v", rec.closed)
	}
	if st, _ := c.State(ctx, &controlpb.StateRequest{}); len(st.Sessions) != 0 {
		t.Errorf("sessions after close: %v", st.Sessions)
	}

	// Stopping the component closes what is still open, then stops the handler.
	SendFiles(ours, 9, files.Files())
	if _, err := c.OpenSession(ctx, &controlpb.OpenSessionRequest{SessionId: 9, Role: controlpb.Role_SERVER, Service: "Nic", Tx: size, Rx: size, Files: 6}); err != nil {
		t.Fatal(err)
	}
	c.Stop(ctx, &controlpb.StopRequest{})
	if !rec.stopped || len(rec.closed) != 2 || rec.closed[1] != 9 {
		t.Errorf("stop: handler stopped %v, closed %v", rec.stopped, rec.closed)
	}
}

// Exit ends the component as the supervisor's Stop does (sessions closed, then the handler
// stopped) and keeps the exit value for Main.
func TestExitStopsWithExitValue(t *testing.T) {
	ours, theirs := socketPair(t)
	rec := &recorder{}
	c := New(Spec{}, slog.New(slog.DiscardHandler), func(*Component) (Handler, error) { return rec, nil })
	go c.inbox.receive(theirs)
	ctx := context.Background()
	if _, err := c.Start(ctx, &controlpb.StartRequest{Name: "t", Config: &controlpb.Config{Text: `<config/>`}}); err != nil {
		t.Fatal(err)
	}
	cfg := packetstream.Config{QueueSize: 16, BulkSize: 16 * packetstream.BlockSize}
	files, err := packetstream.NewSessionFiles("test", cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	SendFiles(ours, 4, files.Files())
	size := &controlpb.StreamSize{QueueSize: 16, BulkSize: 16 * packetstream.BlockSize}
	if _, err := c.OpenSession(ctx, &controlpb.OpenSessionRequest{SessionId: 4, Role: controlpb.Role_SERVER, Service: "Nic", Tx: size, Rx: size, Files: 6}); err != nil {
		t.Fatal(err)
	}
	if c.ExitValue() != 0 {
		t.Errorf("exit value %d before Exit", c.ExitValue())
	}
	c.Exit(3)
	<-c.Exited()
	if !rec.stopped || len(rec.closed) != 1 || c.ExitValue() != 3 {
		t.Errorf("after Exit(3): handler stopped %v, closed %v, exit value %d", rec.stopped, rec.closed, c.ExitValue())
	}
}

func TestEventQueueOrder(t *testing.T) {
	c := New(Spec{}, slog.New(slog.DiscardHandler), nil)
	c.Announce("Nic")
	id := c.Request("Uplink", "x", nil, packetstream.DefaultConfig(), packetstream.DefaultConfig())
	c.Release(id)
	var kinds []string
	for i := 0; i < 3; i++ {
		ev, ok := c.events.Pop(nil, nil)
		if !ok {
			t.Fatal("queue ended")
		}
		kinds = append(kinds, strings.SplitN(ev.String(), ":", 2)[0])
	}
	if strings.Join(kinds, " ") != "announce request release" {
		t.Errorf("events in order %v", kinds)
	}
	close(c.stopped)
	if _, ok := c.events.Pop(nil, c.stopped); ok {
		t.Error("pop after stop returned an event")
	}
}

func TestConfigKeepsScenarioPositions(t *testing.T) {
	scenario := "config\n+ start r\n  + config | verbose: yes\n    x domain off\n    + domain uplink | interface: 10.0.0.1/24\n      + nat | tcp-ports: lots\n-\n"
	root, err := config.Parse("s.hid", []byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	cfg := root.Sub("start").Sub("config")
	n, err := parseConfig("r", &controlpb.Config{Text: string(cfg.XML()), Origin: "s.hid", Positions: Positions(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = n.Sub("domain").Sub("nat").Number("tcp-ports", 0)
	if err == nil || !strings.HasPrefix(err.Error(), `s.hid:6:15: attribute "tcp-ports"`) {
		t.Errorf("error %v does not name the scenario's position", err)
	}
}

// TestExitValueOnTheSocket: the exit value reaches the supervisor whole (negative too) over
// the control socket, where it reads apart from the sessions' messages.
func TestExitValueOnTheSocket(t *testing.T) {
	ours, theirs := socketPair(t)
	if err := sendExit(theirs, -3); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := ours.Read(buf)
	if v, ok := ParseExit(buf[:n]); err != nil || !ok || v != -3 {
		t.Errorf("the supervisor reads %d %v (%v), want -3", v, ok, err)
	}
	if _, ok := ParseExit(make([]byte, headerSize)); ok {
		t.Error("a session's message reads as an exit")
	}
}
