package packetstream

// Sink is the receiving side of a stream: it gets packets, reads them in place and
// acknowledges them. One goroutine uses a Sink at a time.
type Sink struct {
	*endpoint
	submit             consumer
	ack                producer
	bulkStart, bulkEnd uint64
	wantSpace          bool // the last try found the ack queue full
}

// OpenSink maps the stream and returns its sink side.
func OpenSink(f *StreamFiles) (*Sink, error) {
	reg, in, out, err := openSide(f, false)
	if err != nil {
		return nil, err
	}
	return newSink(reg, in, out)
}

func newSink(reg *region, in, out int) (*Sink, error) {
	s := &Sink{
		submit:    newConsumer(newRing(reg, reg.cfg.submitQueue())),
		ack:       newProducer(newRing(reg, reg.cfg.ackQueue())),
		bulkStart: uint64(reg.cfg.bulkStart()),
		bulkEnd:   uint64(reg.cfg.bulkStart() + reg.cfg.BulkSize),
	}
	var err error
	s.endpoint, err = newEndpoint(reg, in, out, func(e *endpoint) Endpoint { s.endpoint = e; return s })
	if err != nil {
		return nil, err
	}
	return s, nil
}

// valid checks a descriptor from the peer against the bulk buffer; the sums are in 64 bits, so
// nothing overflows.
func (s *Sink) valid(off uint64, size uint32) bool {
	return size != 0 && off >= s.bulkStart && off <= s.bulkEnd && uint64(size) <= s.bulkEnd-off
}

// TryGet returns the next submitted packet. A descriptor that points outside the bulk buffer is
// counted as invalid and still returned, so that it is acknowledged like any other; Payload
// returns nil for it.
func (s *Sink) TryGet() (Packet, bool) {
	e := s.submit.peek()
	if e == nil {
		return Packet{}, false
	}
	off, size, gso, csum := descOff(e), descSize32(e), descGSO(e), *s.submit.csum(s.submit.tail)
	s.submit.advance(1)
	if !s.valid(off, size) {
		s.invalid++
		return Packet{Offset: uint32(off), Size: 0, gso: gso, csum: csum}, true
	}
	s.frames++
	s.bytes += uint64(size)
	if s.tapping != nil {
		s.tapping.Frame(s.reg.mem[off : off+uint64(size)])
	}
	return Packet{Offset: uint32(off), Size: size, gso: gso, csum: csum}, true
}

// TryGetBatch is TryGet for up to len(pks) packets at once, and for no more than the ack
// queue has room for, so that each can be acknowledged (CanAck before each TryGet): it looks
// at each queue's index once per batch, not per packet. frames[i] is Payload(pks[i]); frames
// must be as long as pks. It returns how many packets it got.
func (s *Sink) TryGetBatch(pks []Packet, frames [][]byte) int {
	room := s.ack.room(uint32(len(pks)))
	s.wantSpace = room == 0
	n := s.submit.ready(room)
	frames = frames[:n]
	for i := range frames {
		t := s.submit.tail + uint32(i)
		e := s.submit.entry(t)
		off, size, gso, csum := descOff(e), descSize32(e), descGSO(e), *s.submit.csum(t)
		if !s.valid(off, size) {
			s.invalid++
			pks[i] = Packet{Offset: uint32(off), Size: 0, gso: gso, csum: csum}
			frames[i] = nil
			continue
		}
		s.frames++
		s.bytes += uint64(size)
		pks[i] = Packet{Offset: uint32(off), Size: size, gso: gso, csum: csum}
		frames[i] = s.reg.mem[off : off+uint64(size) : off+uint64(size)]
	}
	s.submit.advance(n)
	if s.tapping != nil {
		for _, f := range frames {
			if f != nil {
				s.tapping.Frame(f)
			}
		}
	}
	return int(n)
}

// Payload is the frame's bytes in place, or nil for an invalid descriptor. The source may not
// touch them until the sink acknowledges (an honest one does not; a hostile one can only change
// bytes we read, never where we read).
func (s *Sink) Payload(p Packet) []byte {
	if !s.valid(uint64(p.Offset), p.Size) {
		return nil
	}
	return s.reg.mem[p.Offset : p.Offset+p.Size : p.Offset+p.Size]
}

// TryAck hands p back to the source unless the ack queue is full. The source sees it at the
// latest at the next Wakeup.
func (s *Sink) TryAck(p Packet) bool {
	if !s.ack.put(uint64(p.Offset), p.Size, p.gso, p.csum) {
		s.wantSpace = true
		return false
	}
	s.wantSpace = false
	return true
}

// TryAckBatch is TryAck for as many of pks as the ack queue has room for, with one look at
// its index; it returns how many it acknowledged.
func (s *Sink) TryAckBatch(pks []Packet) int {
	n := s.ack.room(uint32(len(pks)))
	for _, p := range pks[:n] {
		s.ack.write(uint64(p.Offset), p.Size, p.gso, p.csum)
	}
	s.wantSpace = int(n) < len(pks)
	return int(n)
}

// PacketAvail reports whether a packet is waiting (Genode's packet_avail).
func (s *Sink) PacketAvail() bool { return s.submit.avail() }

// CanAck reports whether the ack queue has room (Genode's ready_to_ack).
func (s *Sink) CanAck() bool {
	ok := s.ack.space()
	s.wantSpace = !ok
	return ok
}

// Wakeup publishes what the try calls did and sends the source at most one signal, and only if
// it armed itself to sleep: ack_avail for new acknowledgements, ready_to_submit for freed
// submit entries.
func (s *Sink) Wakeup() {
	s.submit.publish()
	s.ack.publish()
	sig := false
	if s.ack.dirty {
		s.ack.dirty = false
		sig = takeArmed(s.ack.consArmed)
	}
	if s.submit.dirty {
		s.submit.dirty = false
		sig = takeArmed(s.submit.prodArmed) || sig
	}
	s.invalid += s.submit.invalid + s.ack.invalid
	s.submit.invalid, s.ack.invalid = 0, 0
	if s.tapping != nil || s.tap.Load() != nil {
		s.tapBatch()
	}
	s.flush()
	if sig {
		s.signal()
	}
}

// Get is the eager get_packet: it waits for a packet and signals ready_to_submit at once.
func (s *Sink) Get() (Packet, error) {
	for {
		if p, ok := s.TryGet(); ok {
			s.Wakeup()
			return p, nil
		}
		if err := s.own.Wait(); err != nil {
			return Packet{}, err
		}
	}
}

// Ack is the eager acknowledge_packet: it waits while the ack queue is full, then publishes and
// signals at once.
func (s *Sink) Ack(p Packet) error {
	for !s.TryAck(p) {
		if err := s.own.Wait(); err != nil {
			return err
		}
	}
	s.Wakeup()
	return nil
}

// A Sink waits for packets; after it found the ack queue full, for ack space only (packets it
// cannot acknowledge are no reason to wake up).
func (s *Sink) ready() bool {
	if s.wantSpace {
		return s.ack.space()
	}
	return s.submit.avail()
}

func (s *Sink) arm() {
	if s.wantSpace {
		s.ack.prodArmed.Swap(1)
	} else {
		s.submit.consArmed.Swap(1)
	}
}

func (s *Sink) disarm() {
	if s.submit.consArmed.Load() != 0 {
		s.submit.consArmed.Store(0)
	}
	if s.ack.prodArmed.Load() != 0 {
		s.ack.prodArmed.Store(0)
	}
}

func (s *Sink) base() *endpoint { return s.endpoint }
