// Capture: `nicstack capture` taps a session of the running scenario. It asks over the control
// socket (the Capture call, control.go); the supervisor makes a capture socket, passes one end
// to the component that has the session and asks it to tap (StartCapture), and relays what
// arrives at the other end into the call's stream. When the command goes away, its call ends
// and the component is told to stop (StopCapture); when the component goes away, the capture
// socket ends and the call with it.

package supervisor

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc/codes"

	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/component"
)

// CaptureReply says who taps what.
type CaptureReply struct {
	Component string   // the component that taps
	Sessions  []uint64 // the sessions tapped; none: all of the component's
}

// captureFiles marks the id a capture socket goes under on a component's control socket
// (component.StartCapture's counterpart).
const captureFiles = 1 << 63

// captureIDs numbers the captures of every run in this process.
var captureIDs atomic.Uint64

// Capture has the component target names tap (all its sessions, or the one session target
// numbers, at its server, or at its client when the supervisor serves it) and write what
// passes to sock, which Capture closes. stop ends the capture; a capture also ends when the
// component or the session does.
func (s *Supervisor) Capture(target string, sock *os.File) (reply CaptureReply, stop func(), err error) {
	id := captureIDs.Add(1)
	result := make(chan error, 1)
	var c *child
	var p *process
	ran := s.call(func() {
		if c, reply, err = s.captureTarget(target); err != nil {
			sock.Close()
			result <- err
			return
		}
		p = c.proc
		req := &controlpb.CaptureRequest{CaptureId: id, SessionIds: reply.Sessions}
		p.calls.Push(call{
			what: fmt.Sprintf("StartCapture of %q", target),
			do: func(ctx context.Context) error {
				deadline, _ := ctx.Deadline()
				p.sock.SetWriteDeadline(deadline)
				if err := component.SendFiles(p.sock, id|captureFiles, []*os.File{sock}); err != nil {
					return err
				}
				_, err := p.ctl.StartCapture(ctx, req)
				return err
			},
			done:  func(err error) { sock.Close(); result <- err },
			files: []*os.File{sock},
		})
	})
	if !ran {
		sock.Close()
		return reply, nil, errEnded
	}
	select {
	case err = <-result:
	case <-s.done:
		err = errEnded
	}
	if err != nil {
		return reply, nil, err
	}
	stop = func() {
		s.call(func() {
			if c.proc != p {
				return // the process is gone, and the capture with it
			}
			p.calls.Push(call{
				what: fmt.Sprintf("StopCapture of %q", target),
				do: func(ctx context.Context) error {
					_, err := p.ctl.StopCapture(ctx, &controlpb.CaptureStop{CaptureId: id})
					return err
				},
				done: func(error) {},
			})
		})
	}
	return reply, stop, nil
}

// captureTarget finds who taps target (on the loop): a component by name, or the session by
// id, which its server taps unless the supervisor serves it.
func (s *Supervisor) captureTarget(target string) (*child, CaptureReply, error) {
	name := target
	var sessions []uint64
	if s.children[target] == nil {
		id, err := strconv.ParseUint(target, 10, 64)
		if err != nil {
			return nil, CaptureReply{}, refuse(codes.NotFound, fmt.Errorf("no component and no session %q (nicstack status lists them)", target))
		}
		name = ""
		for _, r := range s.requests {
			if r.session == id && !r.opening && r.decision != nil {
				name = r.decision.Server
				if r.decision.Parent {
					name = r.key.client
				}
			}
		}
		if name == "" {
			return nil, CaptureReply{}, refuse(codes.NotFound, fmt.Errorf("no open session %d (nicstack status lists them)", id))
		}
		sessions = []uint64{id}
	}
	c := s.children[name]
	if c == nil || c.proc == nil || c.state != Running {
		return nil, CaptureReply{}, refuse(codes.FailedPrecondition, fmt.Errorf("%s is not running", name))
	}
	return c, CaptureReply{Component: name, Sessions: sessions}, nil
}
