package main

import (
	"errors"
	"sync/atomic"

	"github.com/nicstack/nicstack/drivers/ipxe"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// SessionUplink binds the driver (ipxe.Uplink) to the client end of its Uplink session:
// frames from the wire go to the router on the session's TX stream, frames to send come from
// its RX stream, through the driver's software offloads.
type SessionUplink struct {
	c *packetstream.Client
	// a frame already copied whose acknowledgement found the ack queue full
	unacked packetstream.Packet
	held    bool
	soft    *ipxe.SoftOffload
	refused *atomic.Uint64 // received frames the session had no room for
}

// NewSessionUplink adapts an opened Uplink session, counting in the driver's Counters (a
// component's, which outlive the session).
func NewSessionUplink(c *packetstream.Client, cnt *ipxe.Counters) *SessionUplink {
	return &SessionUplink{c: c, soft: ipxe.NewSoftOffload(cnt), refused: cnt.RXRefused}
}

// Deliver copies a received frame into the bulk buffer and submits it.
func (u *SessionUplink) Deliver(frame []byte) bool {
	p, err := u.c.TX.Alloc(len(frame))
	if errors.Is(err, packetstream.ErrExhausted) {
		u.c.TX.ReleaseAcked()
		p, err = u.c.TX.Alloc(len(frame))
	}
	if err != nil {
		u.refused.Add(1)
		return false
	}
	copy(u.c.TX.Payload(p), frame)
	if !u.c.TX.TrySubmit(p) {
		u.c.TX.Release(p)
		u.refused.Add(1)
		return false
	}
	return true
}

// DeliverDone publishes the burst with at most one signal and frees what was acknowledged.
func (u *SessionUplink) DeliverDone() {
	u.c.TX.Wakeup()
	u.c.TX.ReleaseAcked()
}

// Fetch copies the router's next frame into buf and acknowledges it. The NIC has no offloads,
// so the frame goes through ipxe.SoftOffload: a partial checksum is completed, a TCP
// super-frame handed out one segment per call. An invalid descriptor comes back as n = 0, a
// frame too long for buf, or with offload metadata that does not fit it, as n > len(buf):
// both are acknowledged and dropped by the driver.
func (u *SessionUplink) Fetch(buf []byte) (n int, ok bool) {
	if u.soft.Pending() {
		return u.soft.Next(buf), true
	}
	if u.held {
		if !u.c.RX.TryAck(u.unacked) {
			return 0, false
		}
		u.held = false
	}
	p, ok := u.c.RX.TryGet()
	if !ok {
		return 0, false
	}
	n = u.soft.Copy(buf, u.c.RX.Payload(p), p.Offload())
	if !u.c.RX.TryAck(p) {
		u.unacked, u.held = p, true
	}
	return n, true
}

// FetchDone publishes the acknowledgements with at most one wakeup.
func (u *SessionUplink) FetchDone() { u.c.RX.Wakeup() }
