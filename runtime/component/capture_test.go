package component

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev"
	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/capture"
	"github.com/nicstack/nicstack/runtime/packetstream"
	"github.com/nicstack/nicstack/runtime/pcap"
)

// serve opens session id at c as its server over new files (sent on the control socket ours)
// and returns the client's end.
func serve(t *testing.T, c *Component, ours *net.UnixConn, id uint64) *packetstream.Client {
	t.Helper()
	cfg := packetstream.Config{QueueSize: 16, BulkSize: 16 * packetstream.BlockSize}
	files, err := packetstream.NewSessionFiles("test", cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	client, err := packetstream.OpenClient(files)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if err := SendFiles(ours, id, files.Files()); err != nil {
		t.Fatal(err)
	}
	size := &controlpb.StreamSize{QueueSize: 16, BulkSize: 16 * packetstream.BlockSize}
	if _, err := c.OpenSession(context.Background(), &controlpb.OpenSessionRequest{SessionId: id, Role: controlpb.Role_SERVER,
		Service: "Nic", Label: "c -> ", Tx: size, Rx: size, Files: 6}); err != nil {
		t.Fatal(err)
	}
	return client
}

// startCapture hands c a capture socket over the control socket ours and starts capture id of
// sessions; it returns the reader's end.
func startCapture(t *testing.T, c *Component, ours *net.UnixConn, id uint64, sessions ...uint64) (*os.File, error) {
	t.Helper()
	reader, sock, err := capture.Pair()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	defer sock.Close()
	if err := SendFiles(ours, id|captureFiles, []*os.File{sock}); err != nil {
		t.Fatal(err)
	}
	_, err = c.StartCapture(context.Background(), &controlpb.CaptureRequest{CaptureId: id, SessionIds: sessions})
	return reader, err
}

// readCapture reads the next message on a capture socket's reader end; io.EOF once the
// component closed its end.
func readCapture(t *testing.T, r *os.File) (capture.Message, []string, error) {
	t.Helper()
	r.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, capture.MaxMessage)
	n, err := r.Read(b)
	if err != nil {
		return capture.Message{}, nil, err
	}
	m, err := capture.ParseMessage(b[:n])
	if err != nil {
		t.Fatal(err)
	}
	var frames []string
	for rest := m.Records; ; {
		rec, next, err := pcap.NextRecord(rest)
		if err == io.EOF {
			return m, frames, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		frames, rest = append(frames, string(rec.Frame)), next
	}
}

// A capture of a session sees the frames the component receives and sends on it; it ends
// when the session closes, which its reader sees as the end of the socket.
func TestCaptureTapsASessionUntilItCloses(t *testing.T) {
	ours, theirs := socketPair(t)
	rec := &recorder{}
	c := New(Spec{}, slog.New(slog.DiscardHandler), func(*Component) (Handler, error) { return rec, nil })
	go c.inbox.receive(theirs)
	ctx := context.Background()
	if _, err := c.Start(ctx, &controlpb.StartRequest{Name: "t", Config: &controlpb.Config{Text: `<config/>`}}); err != nil {
		t.Fatal(err)
	}
	client := serve(t, c, ours, 7)
	reader, err := startCapture(t, c, ours, 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startCapture(t, c, ours, 4, 99); err == nil {
		t.Error("a capture of a session that is not open started")
	}
	if _, err := startCapture(t, c, ours, 5, 7); err == nil {
		t.Error("a second capture of a session started")
	}
	srv := rec.opened[0].Server
	srv.TX.Wakeup() // the taps take over at each endpoint's next batch
	srv.RX.Wakeup()

	p, _ := client.TX.Alloc(15)
	copy(client.TX.Payload(p), "from the client")
	client.TX.TrySubmit(p)
	client.TX.Wakeup()
	got, ok := srv.TX.TryGet()
	if !ok {
		t.Fatal("no frame at the server")
	}
	srv.TX.TryAck(got)
	srv.TX.Wakeup()
	if m, frames, err := readCapture(t, reader); err != nil || m.Session != 7 || m.Dir != capture.In || len(frames) != 1 || frames[0] != "from the client" {
		t.Errorf("in: %+v %q %v", m, frames, err)
	}
	out, _ := srv.RX.Reserve(13)
	copy(out, "to the client")
	srv.RX.Commit(13, netdev.Offload{})
	srv.RX.Wakeup()
	if m, frames, err := readCapture(t, reader); err != nil || m.Dir != capture.Out || len(frames) != 1 || frames[0] != "to the client" {
		t.Errorf("out: %+v %q %v", m, frames, err)
	}

	c.CloseSession(ctx, &controlpb.CloseSessionRequest{SessionId: 7})
	if _, _, err := readCapture(t, reader); err != io.EOF {
		t.Errorf("after the session closed the reader got %v, want EOF", err)
	}
}

// A capture of the whole component taps the sessions opened later too, and StopCapture ends
// it: the socket closes and the endpoints drop their taps.
func TestCaptureOfAllSessionsFollowsNewOnes(t *testing.T) {
	ours, theirs := socketPair(t)
	rec := &recorder{}
	c := New(Spec{}, slog.New(slog.DiscardHandler), func(*Component) (Handler, error) { return rec, nil })
	go c.inbox.receive(theirs)
	ctx := context.Background()
	if _, err := c.Start(ctx, &controlpb.StartRequest{Name: "t", Config: &controlpb.Config{Text: `<config/>`}}); err != nil {
		t.Fatal(err)
	}
	reader, err := startCapture(t, c, ours, 1)
	if err != nil {
		t.Fatal(err)
	}
	client := serve(t, c, ours, 8)
	srv := rec.opened[0].Server
	srv.TX.Wakeup()
	p, _ := client.TX.Alloc(3)
	copy(client.TX.Payload(p), "new")
	client.TX.TrySubmit(p)
	client.TX.Wakeup()
	srv.TX.TryGet()
	srv.TX.Wakeup()
	if m, frames, err := readCapture(t, reader); err != nil || m.Session != 8 || len(frames) != 1 || frames[0] != "new" {
		t.Errorf("a session opened after the capture started: %+v %q %v", m, frames, err)
	}
	c.StopCapture(ctx, &controlpb.CaptureStop{CaptureId: 1})
	if _, _, err := readCapture(t, reader); err != io.EOF {
		t.Errorf("after StopCapture the reader got %v, want EOF", err)
	}
	if rec.opened[0].tappedBy != 0 {
		t.Error("the session is still marked tapped")
	}
}
