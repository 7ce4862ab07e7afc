// Package tcpstate follows one TCP connection through the router from the segments both
// directions carry: opening until both SYNs are acknowledged, open, closing from the first
// FIN, closed when both FINs are acknowledged or on RST. It never rejects a segment; the
// router uses the state only for the link state's lifetime.
package tcpstate

import "github.com/nicstack/nicstack/router/header"

// State of a tracked connection.
type State uint8

const (
	Opening State = iota
	Open
	Closing
	Closed
)

func (s State) String() string {
	switch s {
	case Opening:
		return "opening"
	case Open:
		return "open"
	case Closing:
		return "closing"
	}
	return "closed"
}

// Conn is the tracking state; side 0 is the client (the side that opened the link state).
type Conn struct {
	State State
	syn   [2]flag
	fin   [2]flag
}

type flag struct {
	seen, acked bool
	seq         uint32 // sequence number the flag occupies; acknowledged by seq+1
}

// Segment accounts one segment sent by side (0 or 1) and returns the new state.
func (c *Conn) Segment(side int, flags uint8, seq, ack uint32, payload int) State {
	if c.State == Closed {
		return Closed
	}
	if flags&header.TCPRst != 0 {
		c.State = Closed
		return Closed
	}
	peer := 1 - side
	if flags&header.TCPAck != 0 {
		for _, f := range []*flag{&c.syn[peer], &c.fin[peer]} {
			if f.seen && !f.acked && seqAfterEq(ack, f.seq+1) {
				f.acked = true
			}
		}
	}
	if flags&header.TCPSyn != 0 && !c.syn[side].seen {
		c.syn[side] = flag{seen: true, seq: seq}
	}
	if flags&header.TCPFin != 0 && !c.fin[side].seen {
		n := uint32(payload)
		if flags&header.TCPSyn != 0 {
			n++
		}
		c.fin[side] = flag{seen: true, seq: seq + n}
	}
	switch {
	case c.fin[0].acked && c.fin[1].acked:
		c.State = Closed
	case c.fin[0].seen || c.fin[1].seen:
		c.State = Closing
	case c.syn[0].acked && c.syn[1].acked:
		c.State = Open
	}
	return c.State
}

// seqAfterEq compares sequence numbers modulo 2^32.
func seqAfterEq(a, b uint32) bool { return int32(a-b) >= 0 }
