// The control connection: a client of the control socket reads the status (JSON) and may then
// send one request, a JSON line: a capture (capture.go, with the capture socket attached), an
// attach or a detach (attach.go).

package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/runtime/component"
)

// Request is what a client sends on the control socket after reading the status: one of its
// fields.
type Request struct {
	Capture string      `json:"capture,omitempty"` // a component's name, or a session id as status lists it
	Attach  *Attachment `json:"attach,omitempty"`
	Detach  string      `json:"detach,omitempty"` // an attachment's name
}

// Reply answers an attach or a detach.
type Reply struct {
	Attached *Attachment `json:"attached,omitempty"` // the attachment as kept, its defaults filled in
	Error    string      `json:"error,omitempty"`
}

// serveRequest follows a status connection: it reads the one request, if any (a plain status
// query just closes), and answers it.
func (s *Supervisor) serveRequest(conn net.Conn) {
	u, ok := conn.(*net.UnixConn)
	if !ok {
		return
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := u.ReadMsgUnix(buf, oob)
	if err != nil || n == 0 {
		return
	}
	files, _ := component.ReceivedFiles(oob[:oobn], "capture") // none on a malformed message
	var req Request
	if json.Unmarshal(buf[:n], &req) == nil && req.Capture != "" {
		s.serveCapture(conn, req.Capture, files)
		return
	}
	for _, f := range files {
		f.Close()
	}
	var reply Reply
	switch {
	case req.Attach != nil:
		a, err := s.Attach(*req.Attach)
		if err != nil {
			reply.Error = err.Error()
		} else {
			reply.Attached = &a
		}
	case req.Detach != "":
		if err := s.Detach(req.Detach); err != nil {
			reply.Error = err.Error()
		}
	default:
		reply.Error = `a request names what it asks: {"capture": "NAME or SESSION"}, {"attach": {...}} or {"detach": "NAME"}`
	}
	json.NewEncoder(conn).Encode(reply)
}

// RequestAttach asks the supervisor at the control socket path to attach a, and returns the
// attachment as it keeps it.
func RequestAttach(path string, a Attachment) (Attachment, error) {
	reply, err := ask(path, Request{Attach: &a})
	if err != nil {
		return a, err
	}
	return *reply.Attached, nil
}

// RequestDetach asks the supervisor at the control socket path to detach name.
func RequestDetach(path, name string) error {
	_, err := ask(path, Request{Detach: name})
	return err
}

// ask sends req on a control connection to path, after the status, and reads the reply.
func ask(path string, req Request) (Reply, error) {
	var reply Reply
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return reply, fmt.Errorf("no supervisor answers at %s (is `nicstack run` running?): %w", path, err)
	}
	defer c.Close()
	// An attach waits for the loop, which a launch does not hold up; a detach for no stop.
	c.SetDeadline(time.Now().Add(30 * time.Second))
	dec := json.NewDecoder(c)
	var st Status
	if err := dec.Decode(&st); err != nil {
		return reply, fmt.Errorf("reading status from %s: %w", path, err)
	}
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return reply, fmt.Errorf("asking %s: %w", path, err)
	}
	if err := dec.Decode(&reply); err != nil {
		return reply, fmt.Errorf("reading the answer from %s: %w", path, err)
	}
	if reply.Error != "" {
		return reply, errors.New(reply.Error)
	}
	return reply, nil
}
