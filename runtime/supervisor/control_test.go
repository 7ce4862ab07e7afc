package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/local"
	"google.golang.org/grpc/status"

	"github.com/nicstack/nicstack/proto/supervisorpb"
)

// A client that speaks the Supervisor service itself attaches a guest to a running
// scenario and detaches it, and a refused request comes back with the code of its kind and
// the supervisor's words. The commands' client (client.go) returns those words alone, the
// code kept. The binaries are files that never start: the loop retries them meanwhile.
func TestControlService(t *testing.T) {
	bin := t.TempDir()
	for _, b := range []string{"intel_nic_hw", "nic_router", "vm"} {
		if err := os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/false\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := newRun(t, attachScenario, func(o *Options) { o.BinDirs = []string{bin} })
	path := filepath.Join(t.TempDir(), "control.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.s.ServeControl(ctx, path); err != nil {
		t.Fatal(err)
	}
	r.start()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(local.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sup := supervisorpb.NewSupervisorClient(conn)
	call, done := context.WithTimeout(context.Background(), 30*time.Second)
	defer done()

	got, err := sup.Attach(call, &supervisorpb.Attachment{Name: "vm2"})
	if err != nil || got.Guest != "embedded" || got.Label != "vm2" || got.Router != "nic_router" {
		t.Fatalf("Attach vm2: %v (%v), want an embedded guest labelled vm2 at nic_router", got, err)
	}
	statusHas := func(name string) bool {
		t.Helper()
		reply, err := sup.Status(call, &supervisorpb.StatusRequest{})
		var st Status
		if err != nil || json.Unmarshal(reply.Json, &st) != nil {
			t.Fatalf("Status: %v", err)
		}
		for _, a := range st.Attachments {
			if a.Name == name {
				return true
			}
		}
		return false
	}
	if !statusHas("vm2") {
		t.Error("the status does not list vm2 among the attachments")
	}

	for _, tc := range []struct {
		what string
		err  error
		code codes.Code
		msg  string
	}{
		{"Attach vm2 again", second(sup.Attach(call, &supervisorpb.Attachment{Name: "vm2"})),
			codes.AlreadyExists, "attach vm2: an attachment has that name already"},
		{"Attach a name of the file", second(sup.Attach(call, &supervisorpb.Attachment{Name: "vm1"})),
			codes.AlreadyExists, "attach vm1: the scenario file has that name already"},
		{"Attach an unknown guest kind", second(sup.Attach(call, &supervisorpb.Attachment{Name: "c1", Guest: "tun"})),
			codes.InvalidArgument, `attach c1: guest "tun": want embedded, netns, tap, vhost-user`},
		{"Attach at an unknown router", second(sup.Attach(call, &supervisorpb.Attachment{Name: "c1", Router: "nope"})),
			codes.NotFound, `attach c1: router "nope": the scenario has no such child`},
		{"Attach a label no policy selects", second(sup.Attach(call, &supervisorpb.Attachment{Name: "c1", Label: "other"})),
			codes.FailedPrecondition, `attach c1: no <policy> of the router selects the label "other", and it has no <default-policy>`},
		{"Detach an unknown name", second(sup.Detach(call, &supervisorpb.DetachRequest{Name: "vm9"})),
			codes.NotFound, `no attachment "vm9" (nicstack status marks them)`},
		{"Detach a start of the file", second(sup.Detach(call, &supervisorpb.DetachRequest{Name: "vm1"})),
			codes.FailedPrecondition, `"vm1" is a <start> of the scenario file, not an attachment: remove it from the file`},
		{"Detach no name", second(sup.Detach(call, &supervisorpb.DetachRequest{})),
			codes.InvalidArgument, "detach: name the attachment"},
		{"Capture what the run lacks", captureErr(call, sup, "nic_drv"),
			codes.NotFound, `no component and no session "nic_drv" (nicstack status lists them)`},
	} {
		if s := status.Convert(tc.err); s.Code() != tc.code || s.Message() != tc.msg {
			t.Errorf("%s: %v, want %v %q", tc.what, tc.err, tc.code, tc.msg)
		}
	}

	err = RequestDetach(path, "vm9")
	if want := `no attachment "vm9" (nicstack status marks them)`; err == nil || err.Error() != want || status.Code(err) != codes.NotFound {
		t.Errorf("RequestDetach of an unknown name: %v (%v), want NotFound %q", err, status.Code(err), want)
	}
	if stale(path) {
		t.Error("the served socket reads as stale")
	}

	if _, err := sup.Detach(call, &supervisorpb.DetachRequest{Name: "vm2"}); err != nil {
		t.Fatalf("Detach vm2: %v", err)
	}
	if statusHas("vm2") {
		t.Error("vm2 is still an attachment after its detach")
	}
}

// second is the error of a call's two results.
func second[T any](_ T, err error) error { return err }

// captureErr is how a Capture call of target ends, or nil when it starts.
func captureErr(ctx context.Context, sup supervisorpb.SupervisorClient, target string) error {
	stream, err := sup.Capture(ctx, &supervisorpb.CaptureRequest{Target: target})
	if err != nil {
		return err
	}
	_, err = stream.Recv()
	return err
}

// A socket no supervisor listens on is stale; one nothing is at is not a socket.
func TestStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.sock")
	if stale(path) {
		t.Error("no file reads as a stale socket")
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if !stale(path) {
		t.Error("a socket no one listens on is not stale")
	}
	err = RequestDetach(path, "vm2")
	var no *unanswered
	if !errors.As(err, &no) || !strings.HasPrefix(err.Error(), "no supervisor answers at "+path+" (is `nicstack run` running?)") {
		t.Errorf("asking no one: %v", err)
	}
}
