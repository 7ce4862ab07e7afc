package main

import (
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/router"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Port is the router's side of one session, the router.Port over its two packet streams: it
// sends on out (the server's RX, or a nic-client's TX) and receives from in.
type Port struct {
	out  *packetstream.Source
	in   *packetstream.Sink
	link func(up bool)
	acks []packetstream.Packet // held frames released while the ack queue was full

	// Signal coalescing (see Loop.round).
	sig         *coalescing // the loop's
	unsignalled int         // frames submitted since out's last Wakeup
	since       int64       // round time of the first of them
	coalesce    int         // unsignalled frames that make the port signal at once
}

// A Port can hold frames for the router's egress queue of a domain with <fq-codel>.
var _ router.QueuePort = (*Port)(nil)

// coalescing is what a Loop tells its ports while a round runs.
type coalescing struct {
	lazy bool  // in a saturated round (see Loop.round): Flush may defer signals
	now  int64 // the round's time, Unix nanoseconds
}

// coalesceTime bounds how long a frame waits for its signal while the router is saturated.
const coalesceTime = 50 * time.Microsecond

// newPort returns a port over out and in, in the loop that sig belongs to; link (may be nil)
// tells the session's client its link state.
func newPort(out *packetstream.Source, in *packetstream.Sink, link func(up bool), sig *coalescing) *Port {
	return &Port{out: out, in: in, link: link, acks: make([]packetstream.Packet, 0, 16),
		sig: sig, coalesce: max(1, out.Config().QueueSize/4)}
}

// Alloc reserves a frame in out's bulk buffer; false when its submit queue or buffer is full.
func (p *Port) Alloc(size int) ([]byte, bool) {
	b, ok := p.out.Reserve(size)
	if !ok && p.out.CanSubmit() && p.reclaim() { // acks may have arrived since the round began
		b, ok = p.out.Reserve(size)
	}
	return b, ok
}

// Submit queues the frame Alloc returned; Alloc checked the queue has room.
func (p *Port) Submit(frame []byte, off netdev.Offload) {
	p.out.Commit(len(frame), off)
	if p.unsignalled == 0 {
		p.since = p.sig.now
	}
	p.unsignalled++
}

// Flush publishes and wakes the peer once. Inside a round of a busy Loop it may leave that to
// a later round (see Loop.round).
func (p *Port) Flush() { p.wakeOut(!p.sig.lazy) }

// wakeOut publishes what was sent and signals the client if it sleeps, unless now is false and
// the frames sent since the last signal are fewer than coalesce and younger than
// coalesceTime.
func (p *Port) wakeOut(now bool) {
	if !now && p.unsignalled > 0 && p.unsignalled < p.coalesce && p.sig.now-p.since < int64(coalesceTime) {
		return
	}
	p.out.Wakeup()
	p.unsignalled = 0
}

// Hold allocates a frame in out's bulk buffer for the router's egress queue (router.QueuePort):
// it waits there, unsubmitted, until the router's scheduler picks it. id is frameID of its
// packet.
func (p *Port) Hold(size int) (uint64, []byte, bool) {
	pk, err := p.out.Alloc(size)
	if err == packetstream.ErrExhausted && p.reclaim() {
		pk, err = p.out.Alloc(size)
	}
	if err != nil {
		return 0, nil, false
	}
	return frameID(pk), p.out.Payload(pk), true
}

// SubmitHeld submits the frame Hold allocated as id, its first size bytes.
func (p *Port) SubmitHeld(id uint64, size int, off *netdev.Offload) bool {
	pk := heldPacket(id)
	if size < int(pk.Size) {
		pk = p.out.Trim(pk, size)
	}
	if *off != (netdev.Offload{}) {
		pk = pk.WithOffload(*off)
	}
	if !p.out.TrySubmit(pk) {
		return false
	}
	if p.unsignalled == 0 {
		p.since = p.sig.now
	}
	p.unsignalled++
	return true
}

// Discard frees a frame Hold allocated.
func (p *Port) Discard(id uint64) { p.out.Release(heldPacket(id)) }

// Unacked is what out has in flight.
func (p *Port) Unacked() (frames, bytes int) { return p.out.InFlight(), p.out.InFlightBytes() }

// Buffer is what out can hold: descriptors or blocks, the fewer, and bytes, the buffer's or
// the bound of bytes in flight the session's route set, the fewer (the egress queue sizes
// itself within it).
func (p *Port) Buffer() (frames, bytes int) {
	c := p.out.Config()
	bytes = c.BulkSize
	if b := p.out.QueueBytes(); b > 0 {
		bytes = min(bytes, b)
	}
	return min(c.QueueSize, c.BulkSize/packetstream.BlockSize), bytes
}

// heldPacket is the packet of a frameID.
func heldPacket(id uint64) packetstream.Packet {
	return packetstream.Packet{Offset: uint32(id >> 32), Size: uint32(id)}
}

// Release acknowledges a frame the router held; id is frameID of its packet.
func (p *Port) Release(id uint64) { p.ack(heldPacket(id)) }

// ack acknowledges a received frame, or keeps it for retryAcks while the ack queue is full.
func (p *Port) ack(pk packetstream.Packet) {
	if !p.in.TryAck(pk) {
		p.acks = append(p.acks, pk)
	}
}

// ackAll acknowledges received frames, as ack does each.
func (p *Port) ackAll(pks []packetstream.Packet) {
	n := p.in.TryAckBatch(pks)
	p.acks = append(p.acks, pks[n:]...)
}

// LinkState passes the router's link state to the session's client.
func (p *Port) LinkState(up bool) {
	if p.link != nil {
		p.link(up)
	}
}

// frameID is the id the router gives back through Release: enough to acknowledge the packet
// (the source checks offset and size only).
func frameID(pk packetstream.Packet) uint64 { return uint64(pk.Offset)<<32 | uint64(pk.Size) }

// reclaim frees what the peer acknowledged of our frames.
func (p *Port) reclaim() bool { return p.out.ReleaseAcked() > 0 }

// retryAcks acknowledges held frames whose Release found the ack queue full.
func (p *Port) retryAcks() {
	n := 0
	for _, pk := range p.acks {
		if !p.in.TryAck(pk) {
			break
		}
		n++
	}
	p.acks = append(p.acks[:0], p.acks[n:]...)
}
