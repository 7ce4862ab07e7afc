package packetstream

import "errors"

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
	// The eventfds as in StreamFiles; each side dups its own descriptors of both, as
	// OpenSource and OpenSink do, and the originals go.
	f := &StreamFiles{Cfg: cfg}
	var err error
	if f.ToSink, err = newEventFile("heap-to-sink"); err != nil {
		return nil, nil, err
	}
	defer f.ToSink.Close()
	if f.ToSource, err = newEventFile("heap-to-source"); err != nil {
		return nil, nil, err
	}
	defer f.ToSource.Close()
	reg := heapRegion(cfg) // shared by both sides; unmapping it is a no-op
	in, out, err := sideFds(f, true)
	if err != nil {
		return nil, nil, err
	}
	src, err := newSource(reg, in, out)
	if err != nil {
		return nil, nil, err
	}
	if in, out, err = sideFds(f, false); err != nil {
		src.Close()
		return nil, nil, err
	}
	snk, err := newSink(reg, in, out)
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
