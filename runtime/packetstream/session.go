package packetstream

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Client is the client's end of a Nic or Uplink session (a VM, a driver): it sends on TX and
// receives on RX.
type Client struct {
	TX *Source
	RX *Sink
}

// Server is the server's end of a session (the router): it receives the client's TX and sends
// on RX.
type Server struct {
	TX *Sink
	RX *Source
}

// OpenClient maps both streams of a session as its client.
func OpenClient(s *SessionFiles) (*Client, error) {
	tx, err := OpenSource(s.TX)
	if err != nil {
		return nil, err
	}
	rx, err := OpenSink(s.RX)
	if err != nil {
		tx.Close()
		return nil, err
	}
	return &Client{TX: tx, RX: rx}, nil
}

// OpenServer maps both streams of a session as its server.
func OpenServer(s *SessionFiles) (*Server, error) {
	tx, err := OpenSink(s.TX)
	if err != nil {
		return nil, err
	}
	rx, err := OpenSource(s.RX)
	if err != nil {
		tx.Close()
		return nil, err
	}
	return &Server{TX: tx, RX: rx}, nil
}

// Close closes both endpoints.
func (c *Client) Close() error { return errors.Join(c.TX.Close(), c.RX.Close()) }

// Close closes both endpoints.
func (s *Server) Close() error { return errors.Join(s.TX.Close(), s.RX.Close()) }

// NewHeapStream returns both sides of a stream whose region is ordinary Go memory, with real
// eventfds: for tests in one process, where the race detector sees every access (it cannot see
// a mapping).
func NewHeapStream(cfg Config) (*Source, *Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	reg := heapRegion(cfg)
	// Two eventfds as in StreamFiles; each side owns its own descriptors of both.
	var fds [4]int // to-sink, to-source, and their duplicates
	for i := range fds {
		var fd int
		var err error
		if i < 2 {
			fd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		} else {
			fd, err = unix.FcntlInt(uintptr(fds[i-2]), unix.F_DUPFD_CLOEXEC, 0)
		}
		if err != nil {
			for _, f := range fds[:i] {
				unix.Close(f)
			}
			return nil, nil, fmt.Errorf("packetstream: heap stream: %w", err)
		}
		fds[i] = fd
	}
	src, err := newSource(reg, fds[1], fds[0])
	if err != nil {
		unix.Close(fds[2])
		unix.Close(fds[3])
		return nil, nil, err
	}
	snk, err := newSink(reg, fds[2], fds[3])
	if err != nil {
		src.Close()
		return nil, nil, err
	}
	return src, snk, nil
}

// NewHeapSession returns both ends of a session over heap streams (see NewHeapStream).
func NewHeapSession(tx, rx Config) (*Client, *Server, error) {
	txSrc, txSink, err := NewHeapStream(tx)
	if err != nil {
		return nil, nil, err
	}
	rxSrc, rxSink, err := NewHeapStream(rx)
	if err != nil {
		txSrc.Close()
		txSink.Close()
		return nil, nil, err
	}
	return &Client{TX: txSrc, RX: rxSink}, &Server{TX: txSink, RX: rxSrc}, nil
}
