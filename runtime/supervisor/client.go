// The control socket's client side: what `nicstack status`, `capture`, `attach` and
// `detach` and nicstack-cni ask a running supervisor (control.go serves it).

package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/local"
	"google.golang.org/grpc/status"

	"github.com/nicstack/nicstack/proto/supervisorpb"
)

// Client deadlines: a status and a capture's start wait for the event loop; an attach too,
// which a launch does not hold up, and a detach waits for no stop.
const (
	dialTimeout    = 2 * time.Second
	statusTimeout  = 10 * time.Second
	requestTimeout = 30 * time.Second
	captureTimeout = 20 * time.Second
)

// unanswered is the error of a call when no supervisor accepts on the socket.
type unanswered struct {
	path string
	err  error
}

func (u *unanswered) Error() string {
	return fmt.Sprintf("no supervisor answers at %s (is `nicstack run` running?): %v", u.path, u.err)
}

func (u *unanswered) Unwrap() error { return u.err }

// client is a connection to the control socket at path.
type client struct {
	path string
	conn *grpc.ClientConn
	supervisorpb.SupervisorClient

	mu      sync.Mutex
	dialErr error // the last dial's, which explains a call that found no one
}

// dial makes a client of the control socket at path; it connects at the first call.
func dial(path string) (*client, error) {
	c := &client{path: path}
	conn, err := grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(local.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			conn, err := (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, "unix", path)
			c.mu.Lock()
			c.dialErr = err
			c.mu.Unlock()
			return conn, err
		}))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.conn, c.SupervisorClient = conn, supervisorpb.NewSupervisorClient(conn)
	return c, nil
}

// answer is the error of a call as the commands print it: no one there, the message of the
// supervisor's refusal (its code kept: status.Code reads it), or else what failed where.
func (c *client) answer(err error) error {
	st := status.Convert(err)
	c.mu.Lock()
	dialErr := c.dialErr
	c.mu.Unlock()
	switch {
	case st.Code() == codes.Unavailable && dialErr != nil:
		return &unanswered{c.path, dialErr}
	case st.Code() == codes.InvalidArgument || st.Code() == codes.AlreadyExists ||
		st.Code() == codes.NotFound || st.Code() == codes.FailedPrecondition:
		return refuse(st.Code(), errors.New(st.Message()))
	}
	return refuse(st.Code(), fmt.Errorf("asking %s: %s", c.path, st.Message()))
}

// ask makes a client of path, runs ask with a context of timeout, and closes the client.
func ask(path string, timeout time.Duration, ask func(context.Context, *client) error) error {
	c, err := dial(path)
	if err != nil {
		return err
	}
	defer c.conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := ask(ctx, c); err != nil {
		return c.answer(err)
	}
	return nil
}

// QueryStatus asks the supervisor at the control socket path for its status.
func QueryStatus(path string) (Status, error) {
	var st Status
	err := ask(path, statusTimeout, func(ctx context.Context, c *client) error {
		reply, err := c.Status(ctx, &supervisorpb.StatusRequest{})
		if err != nil {
			return err
		}
		if err := json.Unmarshal(reply.Json, &st); err != nil {
			return status.Errorf(codes.Internal, "its status: %v", err)
		}
		return nil
	})
	return st, err
}

// RequestAttach asks the supervisor at the control socket path to attach a, and returns the
// attachment as it keeps it.
func RequestAttach(path string, a Attachment) (Attachment, error) {
	err := ask(path, requestTimeout, func(ctx context.Context, c *client) error {
		kept, err := c.Attach(ctx, attachmentToProto(a))
		if err == nil {
			a = attachmentFromProto(kept)
		}
		return err
	})
	return a, err
}

// RequestDetach asks the supervisor at the control socket path to detach name.
func RequestDetach(path, name string) error {
	return ask(path, requestTimeout, func(ctx context.Context, c *client) error {
		_, err := c.Detach(ctx, &supervisorpb.DetachRequest{Name: name})
		return err
	})
}

// A CaptureStream is a capture under way (RequestCapture): who taps what, and the messages
// of the capture socket (runtime/capture's format).
type CaptureStream struct {
	CaptureReply
	c      *client
	stream grpc.ServerStreamingClient[supervisorpb.CaptureEvent]
	cancel context.CancelFunc
}

// RequestCapture asks the supervisor at the control socket path to capture target, a
// component or a session's id. The capture lasts until ctx ends or Close, or until its
// component or session goes away.
func RequestCapture(ctx context.Context, path, target string) (*CaptureStream, error) {
	c, err := dial(path)
	if err != nil {
		return nil, err
	}
	// The call gets no deadline of ctx's (--duration): the supervisor would end the stream at
	// the deadline, a hair before ctx here says it is over. Its end cancels the call instead.
	call, cancelCall := context.WithCancel(context.WithoutCancel(ctx))
	unhook := context.AfterFunc(ctx, cancelCall)
	cs := &CaptureStream{c: c, cancel: func() { unhook(); cancelCall() }}
	late := time.AfterFunc(captureTimeout, cancelCall) // for the start only
	defer late.Stop()
	ev, err := func() (*supervisorpb.CaptureEvent, error) {
		var err error
		if cs.stream, err = c.Capture(call, &supervisorpb.CaptureRequest{Target: target}); err != nil {
			return nil, err
		}
		return cs.stream.Recv()
	}()
	started := ev.GetStarted()
	if err == nil && started == nil {
		err = status.Error(codes.Internal, "the capture did not start with who taps")
	}
	if err != nil {
		cs.Close()
		return nil, fmt.Errorf("capture %s: %w", target, c.answer(err))
	}
	cs.Component, cs.Sessions = started.Component, started.Sessions
	return cs, nil
}

// Next returns the capture's next message (capture.ParseMessage reads it), io.EOF once the
// capture ended because its component or session went away.
func (cs *CaptureStream) Next() ([]byte, error) {
	ev, err := cs.stream.Recv()
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, cs.c.answer(err)
	}
	return ev.GetMessage(), nil
}

// Close ends the capture.
func (cs *CaptureStream) Close() {
	cs.cancel()
	cs.c.conn.Close()
}
