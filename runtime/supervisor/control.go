// The control socket: the run serves the Supervisor gRPC service (proto/supervisor.proto) on
// it, to `nicstack status`, `capture`, `attach` and `detach` and to nicstack-cni (client.go
// asks it). A request the run turns down is a refusal, whose gRPC code tells the kind.

package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/local"
	"google.golang.org/grpc/status"

	"github.com/nicstack/nicstack/proto/supervisorpb"
	"github.com/nicstack/nicstack/runtime/capture"
)

// A refusal is an error of a request the run turns down, of a kind its clients tell apart by
// the gRPC code; its text is the message alone, as the commands print it.
type refusal struct {
	code codes.Code
	err  error
}

func (r refusal) Error() string { return r.err.Error() }
func (r refusal) Unwrap() error { return r.err }

// GRPCStatus makes a refusal a gRPC status (status.FromError, status.Code).
func (r refusal) GRPCStatus() *status.Status { return status.New(r.code, r.err.Error()) }

// refuse gives err the kind code.
func refuse(code codes.Code, err error) error { return refusal{code, err} }

// errEnded answers what comes after the run's end.
var errEnded = refuse(codes.Unavailable, errors.New("the run has ended"))

// ServeControl serves the control socket at path until ctx ends; call it before Run, which
// records the path for RemoveLeftovers. A stale socket from a dead run is replaced; a live
// one is an error (another supervisor runs). The socket file gets the process's umask, as any
// file it makes: the socket's mode and owner keep the service to its user.
func (s *Supervisor) ServeControl(ctx context.Context, path string) error {
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return fmt.Errorf("%s: another nicstack supervisor is running (use --socket for a second one)", path)
	}
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	s.controlSocket = path // for the run's record (leftovers.go), written when Run starts
	srv := grpc.NewServer(grpc.Creds(local.NewCredentials()))
	supervisorpb.RegisterSupervisorServer(srv, control{s: s})
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	go func() {
		defer os.Remove(path)
		srv.Serve(l)
	}()
	return nil
}

// control serves the Supervisor service.
type control struct {
	supervisorpb.UnimplementedSupervisorServer
	s *Supervisor
}

func (c control) Status(context.Context, *supervisorpb.StatusRequest) (*supervisorpb.StatusReply, error) {
	st, ok := c.s.Status()
	if !ok {
		return nil, errEnded
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return &supervisorpb.StatusReply{Json: b}, nil
}

func (c control) Attach(_ context.Context, a *supervisorpb.Attachment) (*supervisorpb.Attachment, error) {
	kept, err := c.s.Attach(attachmentFromProto(a))
	if err != nil {
		return nil, err
	}
	return attachmentToProto(kept), nil
}

func (c control) Detach(_ context.Context, req *supervisorpb.DetachRequest) (*supervisorpb.DetachReply, error) {
	if req.Name == "" {
		return nil, refuse(codes.InvalidArgument, errors.New("detach: name the attachment"))
	}
	if err := c.s.Detach(req.Name); err != nil {
		return nil, err
	}
	return &supervisorpb.DetachReply{}, nil
}

// Capture makes the capture socket the component writes to and relays each of its messages
// into the stream, until the component closes it (the capture ended), the client goes away
// or the run ends. A stream that does not keep up leaves the messages in the socket, and the
// component loses (and counts) what does not fit.
func (c control) Capture(req *supervisorpb.CaptureRequest, stream grpc.ServerStreamingServer[supervisorpb.CaptureEvent]) error {
	ours, theirs, err := capture.Pair()
	if err != nil {
		return err
	}
	defer ours.Close()
	reply, stop, err := c.s.Capture(req.Target, theirs)
	if err != nil {
		return err
	}
	defer stop()
	started := &supervisorpb.CaptureStarted{Component: reply.Component, Sessions: reply.Sessions}
	if err := stream.Send(&supervisorpb.CaptureEvent{Event: &supervisorpb.CaptureEvent_Started{Started: started}}); err != nil {
		return err
	}
	relayed := make(chan struct{})
	defer close(relayed)
	go func() {
		select {
		case <-stream.Context().Done():
		case <-c.s.done:
		case <-relayed:
			return
		}
		ours.SetReadDeadline(time.Now()) // ends the read below
	}()
	buf := make([]byte, capture.MaxMessage)
	for {
		n, err := ours.Read(buf)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded) && stream.Context().Err() != nil:
			return stream.Context().Err()
		case errors.Is(err, os.ErrDeadlineExceeded):
			return errEnded
		case err != nil || n == 0: // the component closed its end
			return nil
		}
		// A copy: gRPC may hold a message after Send returns.
		msg := &supervisorpb.CaptureEvent_Message{Message: bytes.Clone(buf[:n])}
		if err := stream.Send(&supervisorpb.CaptureEvent{Event: msg}); err != nil {
			return err
		}
	}
}

// attachmentFromProto and attachmentToProto carry an Attachment over the service.
func attachmentFromProto(a *supervisorpb.Attachment) Attachment {
	return Attachment{Name: a.Name, Guest: a.Guest, Label: a.Label, Router: a.Router, Affinity: a.Affinity,
		Netns: a.Netns, Address: a.Address, Gateway: a.Gateway, Ifname: a.Ifname, ContainerID: a.ContainerId, Socket: a.Socket}
}

func attachmentToProto(a Attachment) *supervisorpb.Attachment {
	return &supervisorpb.Attachment{Name: a.Name, Guest: a.Guest, Label: a.Label, Router: a.Router, Affinity: a.Affinity,
		Netns: a.Netns, Address: a.Address, Gateway: a.Gateway, Ifname: a.Ifname, ContainerId: a.ContainerID, Socket: a.Socket}
}
