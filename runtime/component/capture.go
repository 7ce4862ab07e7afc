package component

import (
	"context"
	"fmt"
	"os"
	"slices"

	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/capture"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// captureFiles is the bit that sets the id a capture's socket arrives under on the control
// socket apart from session ids.
const captureFiles = 1 << 63

// A tapping is one `nicstack capture` attached to this component: the sessions whose
// endpoints carry its taps, and the socket they write to. One capture at a time taps a
// session.
type tapping struct {
	sock     *os.File
	all      bool // every session, also those opened later
	sessions []uint64
}

// StartCapture taps the sessions req names (none: all, and those opened later) with the
// capture socket the supervisor sent just before.
func (c *Component) StartCapture(_ context.Context, req *controlpb.CaptureRequest) (*controlpb.Empty, error) {
	id := req.GetCaptureId()
	files, err := c.inbox.take(id|captureFiles, 1, filesTimeout)
	if err != nil {
		return nil, fmt.Errorf("capture %d: %w", id, err)
	}
	t := &tapping{sock: files[0], all: len(req.GetSessionIds()) == 0}
	c.mu.Lock()
	defer c.mu.Unlock()
	err = c.startCapture(id, t, req.GetSessionIds())
	if err != nil {
		t.sock.Close()
		return nil, fmt.Errorf("capture %d: %w", id, err)
	}
	return &controlpb.Empty{}, nil
}

// startCapture runs with mu held.
func (c *Component) startCapture(id uint64, t *tapping, sessions []uint64) error {
	if _, ok := c.captures[id]; ok {
		return fmt.Errorf("started twice")
	}
	if t.all {
		for sid := range c.sessions {
			sessions = append(sessions, sid)
		}
	}
	for _, sid := range sessions {
		s, ok := c.sessions[sid]
		switch {
		case !ok:
			return fmt.Errorf("no open session %d here", sid)
		case s.Device():
			if !t.all {
				return fmt.Errorf("session %d is a device session, which has no frames to tap", sid)
			}
		case s.tappedBy != 0:
			return fmt.Errorf("session %d is being captured already", sid)
		}
	}
	c.captures[id] = t
	for _, sid := range sessions {
		if s := c.sessions[sid]; !s.Device() {
			if err := c.tap(id, t, s); err != nil {
				c.stopCapture(id)
				return err
			}
		}
	}
	return nil
}

// tap sets capture id's taps on both endpoints of s (mu held).
func (c *Component) tap(id uint64, t *tapping, s *Session) error {
	in, err := capture.NewTap(t.sock, s.ID, capture.In)
	if err != nil {
		return err
	}
	out, err := capture.NewTap(t.sock, s.ID, capture.Out)
	if err != nil {
		return err
	}
	setTaps(s, in, out)
	s.tappedBy = id
	t.sessions = append(t.sessions, s.ID)
	return nil
}

// setTaps sets the taps of the stream s receives on and the one it sends on.
func setTaps(s *Session, in, out packetstream.Tap) {
	switch {
	case s.Client != nil:
		s.Client.RX.SetTap(in)
		s.Client.TX.SetTap(out)
	case s.Server != nil:
		s.Server.TX.SetTap(in)
		s.Server.RX.SetTap(out)
	}
}

// untap takes the taps away from s, which is closing (mu held). A capture of named sessions
// ends with its last one, which the reader sees as the end of its socket.
func (c *Component) untap(s *Session) {
	id := s.tappedBy
	setTaps(s, nil, nil)
	s.tappedBy = 0
	t := c.captures[id]
	if t == nil {
		return
	}
	t.sessions = slices.DeleteFunc(t.sessions, func(sid uint64) bool { return sid == s.ID })
	if !t.all && len(t.sessions) == 0 {
		c.stopCapture(id)
	}
}

// tapNew sets the taps of every capture of all sessions on s, just opened (mu held).
func (c *Component) tapNew(s *Session) {
	if s.Device() {
		return
	}
	for id, t := range c.captures {
		if t.all {
			if err := c.tap(id, t, s); err != nil {
				c.Log.Warn("capture: tapping a new session", "session", s.ID, "err", err)
			}
			return // one capture taps a session
		}
	}
}

// StopCapture ends capture req names (the supervisor's answer to the reader going away).
func (c *Component) StopCapture(_ context.Context, req *controlpb.CaptureStop) (*controlpb.Empty, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopCapture(req.GetCaptureId())
	return &controlpb.Empty{}, nil
}

// stopCapture runs with mu held. The endpoints drop their taps at their next batch; a tap
// still writing meanwhile finds its socket closed and goes quiet.
func (c *Component) stopCapture(id uint64) {
	t := c.captures[id]
	if t == nil {
		return
	}
	delete(c.captures, id)
	for _, sid := range t.sessions {
		if s := c.sessions[sid]; s != nil && s.tappedBy == id {
			setTaps(s, nil, nil)
			s.tappedBy = 0
		}
	}
	t.sock.Close()
}
