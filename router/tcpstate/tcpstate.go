// Package tcpstate follows one TCP connection through the router from the segments both
// directions carry: opening until both SYNs are acknowledged, open, closing from the first
// FIN, closed when both FINs are acknowledged or on RST. It never rejects a segment; the
// router uses the state only for the link state's lifetime.
package tcpstate

import (
	"encoding/binary"

	"github.com/nicstack/nicstack/netdev/header"
)

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

// Segment accounts one segment sent by side (0 or 1) and returns the new state, and whether
// the segment changed anything of c (a flag seen or acknowledged, the state): most segments
// change nothing, and a router that keeps its state elsewhere writes it only on a change.
func (c *Conn) Segment(side int, flags uint8, seq, ack uint32, payload int) (State, bool) {
	if c.State == Closed {
		return Closed, false
	}
	if flags&header.TCPRst != 0 {
		c.State = Closed
		return Closed, true
	}
	changed := false
	peer := 1 - side
	if flags&header.TCPAck != 0 {
		for _, f := range []*flag{&c.syn[peer], &c.fin[peer]} {
			if f.seen && !f.acked && seqAfterEq(ack, f.seq+1) {
				f.acked, changed = true, true
			}
		}
	}
	if flags&header.TCPSyn != 0 && !c.syn[side].seen {
		c.syn[side] = flag{seen: true, seq: seq}
		changed = true
	}
	if flags&header.TCPFin != 0 && !c.fin[side].seen {
		n := uint32(payload)
		if flags&header.TCPSyn != 0 {
			n++
		}
		c.fin[side] = flag{seen: true, seq: seq + n}
		changed = true
	}
	if changed {
		c.State = c.derived()
	}
	return c.State, changed
}

// seqAfterEq compares sequence numbers modulo 2^32.
func seqAfterEq(a, b uint32) bool { return int32(a-b) >= 0 }

// BinaryLen is the size of a Conn as PutBinary writes it.
const BinaryLen = 18

// PutBinary writes c into b[:BinaryLen]: the state, a byte of flags (seen and acknowledged, of
// each side's SYN and FIN) and the four sequence numbers, for a router's state region.
func (c *Conn) PutBinary(b []byte) {
	_ = b[BinaryLen-1]
	b[0] = byte(c.State)
	var bits byte
	for k, f := range [4]flag{c.syn[0], c.syn[1], c.fin[0], c.fin[1]} {
		if f.seen {
			bits |= 1 << (2 * k)
		}
		if f.acked {
			bits |= 2 << (2 * k)
		}
		binary.LittleEndian.PutUint32(b[2+4*k:], f.seq)
	}
	b[1] = bits
}

// FromBinary reads what PutBinary wrote; false for a Conn that Segment cannot reach: an
// unknown state, a flag acknowledged but not seen, a sequence number of a flag not seen, or a
// state other than the one its flags give (RST aside, which closes any).
func FromBinary(b []byte) (Conn, bool) {
	_ = b[BinaryLen-1]
	c := Conn{State: State(b[0])}
	fs := [4]*flag{&c.syn[0], &c.syn[1], &c.fin[0], &c.fin[1]}
	for k, f := range fs {
		bits := b[1] >> (2 * k) & 3
		f.seen, f.acked = bits&1 != 0, bits&2 != 0
		f.seq = binary.LittleEndian.Uint32(b[2+4*k:])
		if f.acked && !f.seen || !f.seen && f.seq != 0 {
			return Conn{}, false
		}
	}
	if c.State > Closed || c.State != Closed && c.State != c.derived() {
		return Conn{}, false
	}
	return c, true
}

// derived is the state c's flags give, as Segment works it out.
func (c *Conn) derived() State {
	switch {
	case c.fin[0].acked && c.fin[1].acked:
		return Closed
	case c.fin[0].seen || c.fin[1].seen:
		return Closing
	case c.syn[0].acked && c.syn[1].acked:
		return Open
	}
	return Opening
}
