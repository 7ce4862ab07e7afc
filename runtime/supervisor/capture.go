// Capture: `nicstack capture` taps a session of the running scenario. It asks over the status
// socket, handing a capture socket along (SCM_RIGHTS); the supervisor passes that socket to
// the component that has the session and asks it to tap (StartCapture). The frames never pass
// through the supervisor. When the command goes away, its connection closes and the component
// is told to stop (StopCapture); when the component goes away, the command's socket ends.

package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/component"
)

// CaptureReply answers a capture request (Request.Capture).
type CaptureReply struct {
	Component string   `json:"component,omitempty"` // the component that taps
	Sessions  []uint64 `json:"sessions,omitempty"`  // the sessions tapped; none: all of the component's
	Error     string   `json:"error,omitempty"`
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
		return reply, nil, fmt.Errorf("the run has ended")
	}
	select {
	case err = <-result:
	case <-s.done:
		err = fmt.Errorf("the run has ended")
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
			return nil, CaptureReply{}, fmt.Errorf("no component and no session %q (nicstack status lists them)", target)
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
			return nil, CaptureReply{}, fmt.Errorf("no open session %d (nicstack status lists them)", id)
		}
		sessions = []uint64{id}
	}
	c := s.children[name]
	if c == nil || c.proc == nil || c.state != Running {
		return nil, CaptureReply{}, fmt.Errorf("%s is not running", name)
	}
	return c, CaptureReply{Component: name, Sessions: sessions}, nil
}

// serveCapture answers a capture request on a control connection (files: the descriptors it
// carried): the capture lasts until the connection closes.
func (s *Supervisor) serveCapture(conn net.Conn, target string, files []*os.File) {
	var reply CaptureReply
	var stop func()
	var err error
	switch {
	case len(files) != 1:
		err = fmt.Errorf("a capture request carries one capture socket, this one %d", len(files))
	default:
		reply, stop, err = s.Capture(target, files[0])
		files = nil
	}
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		reply.Error = err.Error()
	}
	if json.NewEncoder(conn).Encode(reply) != nil || stop == nil {
		if stop != nil {
			stop()
		}
		return
	}
	// The capture lasts as long as the connection: until the command closes it, or the run
	// ends.
	conn.SetReadDeadline(time.Time{})
	closed := make(chan struct{})
	go func() {
		select {
		case <-s.done:
			conn.Close()
		case <-closed:
		}
	}()
	io.Copy(io.Discard, conn)
	close(closed)
	stop()
}

// RequestCapture asks the supervisor serving the status socket at path to capture target into
// sock (the component's end of a capture socket, capture.Pair), and returns the status it
// read first (it names the sessions) and the connection: the capture lasts until it is closed.
func RequestCapture(path, target string, sock *os.File) (Status, CaptureReply, net.Conn, error) {
	var st Status
	var reply CaptureReply
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return st, reply, nil, fmt.Errorf("no supervisor answers at %s (is `nicstack run` running?): %w", path, err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	dec := json.NewDecoder(c)
	if err := dec.Decode(&st); err != nil {
		c.Close()
		return st, reply, nil, fmt.Errorf("reading status from %s: %w", path, err)
	}
	req, _ := json.Marshal(Request{Capture: target})
	if _, _, err := c.(*net.UnixConn).WriteMsgUnix(req, unix.UnixRights(int(sock.Fd())), nil); err != nil {
		c.Close()
		return st, reply, nil, fmt.Errorf("asking %s for a capture: %w", path, err)
	}
	if err := dec.Decode(&reply); err != nil {
		c.Close()
		return st, reply, nil, fmt.Errorf("reading the capture's answer from %s: %w", path, err)
	}
	if reply.Error != "" {
		c.Close()
		return st, reply, nil, fmt.Errorf("capture %s: %s", target, reply.Error)
	}
	c.SetDeadline(time.Time{})
	return st, reply, c, nil
}
