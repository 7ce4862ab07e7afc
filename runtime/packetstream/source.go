package packetstream

import (
	"fmt"
	"time"

	"github.com/nicstack/nicstack/netdev"
)

// Source is the sending side of a stream: it allocates frames in the bulk buffer, submits them
// and releases them once the sink acknowledged them. One goroutine uses a Source at a time.
type Source struct {
	*endpoint
	submit    producer
	ack       consumer
	alloc     allocator
	bulkStart uint64
	maxFrame  int
	inFlight  int // submitted, not yet taken back by GetAcked
	// inFlightBytes are those frames' bytes; queueBytes bounds them (0: no bound but the
	// queue's descriptors and the buffer), see SetQueueBytes.
	inFlightBytes int
	queueBytes    int
	wantSpace     bool // the last try found the submit queue full
	reserved      int  // block of the frame Reserve returned, not yet committed; -1: none
	marks         netdev.Marks
	epoch         time.Time // the marks' clock starts here
}

// OpenSource maps the stream and returns its source side.
func OpenSource(f *StreamFiles) (*Source, error) {
	reg, in, out, err := openSide(f, true)
	if err != nil {
		return nil, err
	}
	return newSource(reg, in, out)
}

func newSource(reg *region, in, out int) (*Source, error) {
	s := &Source{
		submit:    newProducer(newRing(reg, reg.cfg.submitQueue())),
		ack:       newConsumer(newRing(reg, reg.cfg.ackQueue())),
		alloc:     newAllocator(reg.cfg.blocks(), reg.cfg.frameShift()),
		bulkStart: uint64(reg.cfg.bulkStart()),
		maxFrame:  reg.cfg.MaxFrame(),
		reserved:  -1,
		marks:     netdev.NewMarks(reg.cfg.QueueSize),
		epoch:     time.Now(),
	}
	var err error
	s.endpoint, err = newEndpoint(reg, in, out, func(e *endpoint) Endpoint { s.endpoint = e; return s })
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Alloc reserves size bytes in the bulk buffer. It fails with ErrExhausted while no free run
// fits (collect acknowledgements with GetAcked and Release them), and with an error when size
// can never fit.
func (s *Source) Alloc(size int) (Packet, error) {
	if size <= 0 || size > s.maxFrame {
		return Packet{}, fmt.Errorf("packetstream: cannot allocate %d bytes (1 to %d)", size, s.maxFrame)
	}
	b := s.alloc.alloc(size)
	if b < 0 {
		return Packet{}, ErrExhausted
	}
	return Packet{Offset: s.offset(b), Size: uint32(size)}, nil
}

// offset is where the frame in the run starting at block b begins in the region (block's
// inverse).
func (s *Source) offset(b int) uint32 {
	return uint32(s.bulkStart) + uint32(b)*BlockSize + uint32(s.alloc.shift)
}

// Reserve allocates a frame of size bytes (1 to the largest frame) if the submit queue has
// room and the bulk buffer a free run, and returns its bytes to fill; Commit submits it.
// CanSubmit, Alloc and TrySubmit in one for a source that fills each frame right after it
// allocated it (a router copying frames): the frame needs none of the checks TrySubmit makes on
// a Packet. A frame still reserved is released first.
func (s *Source) Reserve(size int) ([]byte, bool) {
	if s.reserved >= 0 {
		s.alloc.release(s.reserved)
		s.reserved = -1
	}
	if !s.CanSubmit() || size <= 0 || size > s.maxFrame || !s.bytesFit(size) {
		return nil, false
	}
	b := s.alloc.alloc(size)
	if b < 0 {
		return nil, false
	}
	s.reserved = b
	off := s.offset(b)
	return s.reg.mem[off : off+uint32(size) : off+uint32(size)], true
}

// Commit submits the frame Reserve returned, its first size bytes (1 to those reserved), with
// offload metadata o. Reserve found room in the submit queue, and only Commit submits since.
func (s *Source) Commit(size int, o netdev.Offload) {
	b := s.reserved
	if b < 0 || size <= 0 || size > int(s.alloc.block[b].size) {
		panic(fmt.Sprintf("packetstream: commit of %d bytes without a frame reserved for them", size))
	}
	s.reserved = -1
	var p Packet
	if o != (netdev.Offload{}) {
		p = p.WithOffload(o)
	}
	s.submit.write(uint64(s.offset(b)), uint32(size), p.gso, p.csum)
	s.submitted(b, uint32(size))
	if s.tapping != nil {
		s.tapping.Frame(s.Payload(Packet{Offset: s.offset(b), Size: uint32(size)}))
	}
}

// submitted records that the frame in block b's run went to the sink with size bytes.
func (s *Source) submitted(b int, size uint32) {
	st := &s.alloc.block[b]
	st.state, st.size = blockSubmitted, size
	s.inFlight++
	s.inFlightBytes += int(size)
	s.frames++
	s.bytes += uint64(size)
}

// Payload is the frame's bytes in the bulk buffer, for the source to fill.
func (s *Source) Payload(p Packet) []byte {
	return s.reg.mem[p.Offset : p.Offset+p.Size : p.Offset+p.Size]
}

// block returns the first block of p's run if p is one of ours, or -1.
func (s *Source) block(off uint64) int {
	first := s.bulkStart + uint64(s.alloc.shift)
	rel := off - first
	if off < first || rel%BlockSize != 0 || rel/BlockSize >= uint64(s.alloc.n) {
		return -1
	}
	return int(rel / BlockSize)
}

// owned returns p's block; it panics when p is not a packet this source allocated and still
// holds: that is a bug in the caller, never the peer's doing.
func (s *Source) owned(p Packet, what string) int {
	b := s.block(uint64(p.Offset))
	if b < 0 || s.alloc.block[b].state != blockOwned || p.Size == 0 || p.Size > s.alloc.block[b].size {
		panic(fmt.Sprintf("packetstream: %s of a packet this source does not hold (offset %d, size %d)", what, p.Offset, p.Size))
	}
	return b
}

// TrySubmit queues p for the sink unless the submit queue is full. The sink sees it at the
// latest at the next Wakeup (long batches become visible every few dozen frames on their own).
// p must come from Alloc (its Size may have been lowered) and not be submitted already.
func (s *Source) TrySubmit(p Packet) bool {
	b := s.owned(p, "submit")
	if !s.bytesFit(int(p.Size)) {
		s.wantSpace = true
		return false
	}
	if !s.submit.put(uint64(p.Offset), p.Size, p.gso, p.csum) {
		s.wantSpace = true
		return false
	}
	s.wantSpace = false
	s.submitted(b, p.Size)
	if s.tapping != nil {
		s.tapping.Frame(s.Payload(p))
	}
	return true
}

// GetAcked returns the next packet the sink acknowledged, for the source to Release (or to
// reuse: it is the source's again). Acknowledgements naming anything but a packet in flight
// are counted as invalid and skipped; the returned Packet is the source's own record.
func (s *Source) GetAcked() (Packet, bool) {
	for {
		e := s.ack.peek()
		if e == nil {
			return Packet{}, false
		}
		off, size, gso, csum := descOff(e), descSize32(e), descGSO(e), *s.ack.csum(s.ack.tail)
		s.ack.advance(1)
		b := s.block(off)
		if b < 0 || s.alloc.block[b].state != blockSubmitted || size != s.alloc.block[b].size {
			s.invalid++
			continue
		}
		s.alloc.block[b].state = blockOwned
		s.inFlight--
		s.inFlightBytes -= int(size)
		return Packet{Offset: uint32(off), Size: size, gso: gso, csum: csum}, true
	}
}

// ReleaseAcked releases every packet the sink acknowledged (GetAcked and Release for each),
// with one look at the ack queue's index, and returns how many.
func (s *Source) ReleaseAcked() int {
	n := s.ack.ready(s.ack.size)
	released, bytes := 0, 0
	for i := range n {
		t := s.ack.tail + i
		e := s.ack.entry(t)
		off, size := descOff(e), descSize32(e)
		b := s.block(off)
		if b < 0 || s.alloc.block[b].state != blockSubmitted || size != s.alloc.block[b].size {
			s.invalid++
			continue
		}
		s.alloc.release(b)
		released++
		bytes += int(size)
	}
	s.ack.advance(n)
	s.inFlight -= released
	s.inFlightBytes -= bytes
	return released
}

// Trim lowers the size of p, allocated and not submitted, to size bytes (1 to p.Size) and
// frees the blocks past them: a frame read straight into a buffer allocated for the largest
// one keeps only what it needs.
func (s *Source) Trim(p Packet, size int) Packet {
	b := s.owned(p, "trim")
	if size <= 0 || size > int(p.Size) {
		panic(fmt.Sprintf("packetstream: trim of a %d-byte packet to %d bytes", p.Size, size))
	}
	s.alloc.trim(b, size)
	p.Size = uint32(size)
	return p
}

// Release frees a packet the source holds (allocated and not submitted, or acknowledged).
func (s *Source) Release(p Packet) {
	s.alloc.release(s.owned(p, "release"))
}

// CanSubmit reports whether the submit queue has room (Genode's ready_to_submit): a
// descriptor, and bytes below the bound SetQueueBytes set.
func (s *Source) CanSubmit() bool {
	ok := s.submit.space() && (s.queueBytes == 0 || s.inFlightBytes < s.queueBytes)
	s.wantSpace = !ok
	return ok
}

// bytesFit reports whether a frame of size bytes may be submitted under the bound of
// SetQueueBytes: when the bytes in flight stay within it, or none are in flight (a frame
// larger than the bound goes alone).
func (s *Source) bytesFit(size int) bool {
	return s.queueBytes == 0 || s.inFlightBytes == 0 || s.inFlightBytes+size <= s.queueBytes
}

// SetQueueBytes bounds the bytes submitted and not yet acknowledged (0: no bound but the
// queue's descriptors and the buffer): the stream's queue is then bounded by bytes as well
// as descriptors, so that a stream of large frames (TCP super-frames of 64 KiB) holds no
// more time's worth of traffic than one of small ones. Reserve, TrySubmit and CanSubmit
// refuse what would go over it, as they refuse when the queue is full; Submit waits. The
// bound is the source's alone: the sink needs not know it.
func (s *Source) SetQueueBytes(n int) { s.queueBytes = max(n, 0) }

// QueueBytes is the bound SetQueueBytes set (0: none).
func (s *Source) QueueBytes() int { return s.queueBytes }

// AckAvail reports whether an acknowledgement is waiting.
func (s *Source) AckAvail() bool { return s.ack.avail() }

// InFlight is the number of packets submitted and not yet taken back by GetAcked.
func (s *Source) InFlight() int { return s.inFlight }

// InFlightBytes are the bytes of those packets.
func (s *Source) InFlightBytes() int { return s.inFlightBytes }

// Wakeup publishes what the try calls did and sends the sink at most one signal, and only if
// it armed itself to sleep: packet_avail for new packets, ready_to_ack for freed ack entries.
func (s *Source) Wakeup() {
	s.submit.publish()
	s.ack.publish()
	sig := false
	if s.submit.dirty {
		s.submit.dirty = false
		sig = takeArmed(s.submit.consArmed)
	}
	if s.ack.dirty {
		s.ack.dirty = false
		sig = takeArmed(s.ack.prodArmed) || sig
	}
	s.invalid += s.submit.invalid + s.ack.invalid
	s.submit.invalid, s.ack.invalid = 0, 0
	if s.submit.head != s.marks.Head() {
		s.marks.Put(s.submit.head, s.bytes, s.since())
	}
	if s.tapping != nil || s.tap.Load() != nil {
		s.tapBatch()
	}
	s.flush()
	if sig {
		s.signal()
	}
}

// Submit is the eager submit: it waits while the submit queue is full, then publishes and
// signals at once. Over the bound of SetQueueBytes it fails with ErrExhausted: only the
// caller's collecting acknowledgements (GetAcked, WaitAcked) makes room in bytes.
func (s *Source) Submit(p Packet) error {
	for !s.TrySubmit(p) {
		if !s.bytesFit(int(p.Size)) {
			return ErrExhausted
		}
		if err := s.own.Wait(); err != nil {
			return err
		}
	}
	s.Wakeup()
	return nil
}

// WaitAcked is the eager get_acked: it waits for an acknowledgement (the source must have
// packets in flight) and signals ready_to_ack at once.
func (s *Source) WaitAcked() (Packet, error) {
	for {
		if p, ok := s.GetAcked(); ok {
			s.Wakeup()
			return p, nil
		}
		if s.inFlight == 0 {
			return Packet{}, fmt.Errorf("packetstream: waiting for an acknowledgement with no packet in flight")
		}
		if err := s.own.Wait(); err != nil {
			return Packet{}, err
		}
	}
}

// ready, arm and disarm make a Source an Endpoint of a Waiter: it waits for acknowledgements
// while packets are in flight, and for submit space after it found the queue full.
func (s *Source) ready() bool {
	return (s.inFlight > 0 && s.ack.avail()) || (s.wantSpace && s.submit.space() && (s.queueBytes == 0 || s.inFlightBytes < s.queueBytes))
}

func (s *Source) arm() {
	if s.inFlight > 0 {
		s.ack.consArmed.Swap(1)
	}
	if s.wantSpace {
		s.submit.prodArmed.Swap(1)
	}
}

func (s *Source) disarm() {
	if s.ack.consArmed.Load() != 0 {
		s.ack.consArmed.Store(0)
	}
	if s.submit.prodArmed.Load() != 0 {
		s.submit.prodArmed.Store(0)
	}
}

func (s *Source) base() *endpoint { return s.endpoint }
