package ipxe

import (
	"errors"
	"sync/atomic"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// SessionUplink binds the driver to the client end of its Uplink session: frames from the
// wire go to the router on the session's TX stream, frames to send come from its RX stream.
type SessionUplink struct {
	c *packetstream.Client
	// a frame already copied whose acknowledgement found the ack queue full
	unacked packetstream.Packet
	held    bool

	// a super-frame being cut into segments, one per Fetch
	seg segmenter

	Refused   *atomic.Uint64 // received frames the session had no room for
	Offloaded *atomic.Uint64 // frames to send dropped for offload metadata the driver cannot serve
	SoftCsum  *atomic.Uint64 // frames to send whose partial checksum the driver completed
	SoftGSO   *atomic.Uint64 // super-frames the driver cut into segments
	Segments  *atomic.Uint64 // the segments they made
}

// NewSessionUplink adapts an opened Uplink session; it counts in counters of its own until
// UseCounters.
func NewSessionUplink(c *packetstream.Client) *SessionUplink {
	return &SessionUplink{c: c, Refused: new(atomic.Uint64), Offloaded: new(atomic.Uint64),
		SoftCsum: new(atomic.Uint64), SoftGSO: new(atomic.Uint64), Segments: new(atomic.Uint64)}
}

// UseCounters counts in the driver's counters from now on (a component's, which outlive the
// session). Call it before the session carries frames.
func (u *SessionUplink) UseCounters(cnt *Counters) {
	u.Refused, u.Offloaded, u.SoftCsum, u.SoftGSO, u.Segments =
		cnt.RXRefused, cnt.TXOffloadDropped, cnt.TXSoftCsum, cnt.TXSoftGSO, cnt.TXSegments
}

// releaseAcked frees what the router has acknowledged.
func (u *SessionUplink) releaseAcked() {
	for {
		p, ok := u.c.TX.GetAcked()
		if !ok {
			return
		}
		u.c.TX.Release(p)
	}
}

// Deliver copies a received frame into the bulk buffer and submits it.
func (u *SessionUplink) Deliver(frame []byte) bool {
	p, err := u.c.TX.Alloc(len(frame))
	if errors.Is(err, packetstream.ErrExhausted) {
		u.releaseAcked()
		p, err = u.c.TX.Alloc(len(frame))
	}
	if err != nil {
		u.Refused.Add(1)
		return false
	}
	copy(u.c.TX.Payload(p), frame)
	if !u.c.TX.TrySubmit(p) {
		u.c.TX.Release(p)
		u.Refused.Add(1)
		return false
	}
	return true
}

// DeliverDone publishes the burst with at most one signal and frees what was acknowledged.
func (u *SessionUplink) DeliverDone() {
	u.c.TX.Wakeup()
	u.releaseAcked()
}

// Fetch copies the router's next frame into buf and acknowledges it. The NIC has no offloads,
// so Fetch does them in software: it completes a partial checksum, and hands out a TCP
// super-frame one segment per call (see segmenter). An invalid descriptor comes back as n = 0,
// a frame too long for buf, or with offload metadata that does not fit it, as n > len(buf):
// both are acknowledged and dropped by the driver.
func (u *SessionUplink) Fetch(buf []byte) (n int, ok bool) {
	if u.seg.active {
		u.Segments.Add(1)
		return u.seg.cut(buf), true
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
	payload := u.c.RX.Payload(p)
	n = len(payload)
	switch o := p.Offload(); {
	case o.GSOType != netdev.GSONone:
		if u.seg.start(payload, o) {
			u.SoftGSO.Add(1)
			u.Segments.Add(1)
			n = u.seg.cut(buf)
		} else {
			u.Offloaded.Add(1)
			n = len(buf) + 1
		}
	case n > len(buf):
	case o.Flags&netdev.OffloadNeedsCsum != 0:
		copy(buf, payload)
		if completeChecksum(buf[:n], int(o.CsumStart), int(o.CsumOffset)) {
			u.SoftCsum.Add(1)
		} else {
			u.Offloaded.Add(1)
			n = len(buf) + 1
		}
	default:
		copy(buf, payload)
	}
	if !u.c.RX.TryAck(p) {
		u.unacked, u.held = p, true
	}
	return n, true
}

// FetchDone publishes the acknowledgements with at most one wakeup.
func (u *SessionUplink) FetchDone() { u.c.RX.Wakeup() }
