package packetstream

import (
	"sync/atomic"
	"unsafe"
)

// ring is one queue in a region. Indices are free-running uint32 counters; a ring of N entries
// holds N descriptors (used = head - tail), unlike Genode's N-1.
type ring struct {
	head, tail           *atomic.Uint32
	consArmed, prodArmed *atomic.Uint32
	entries, csums       unsafe.Pointer
	mask, size           uint32
}

func newRing(r *region, at int) ring {
	n := uint32(r.cfg.QueueSize)
	return ring{
		head: r.u32(at + offHead), tail: r.u32(at + offTail),
		consArmed: r.u32(at + offConsArmed), prodArmed: r.u32(at + offProdArmed),
		entries: r.ptr(at + queueHdrSize), csums: r.ptr(at + queueHdrSize + int(n)*descSize), mask: n - 1, size: n,
	}
}

func (q *ring) entry(i uint32) unsafe.Pointer {
	return unsafe.Add(q.entries, uintptr(i&q.mask)*descSize)
}

func (q *ring) csum(i uint32) *uint16 {
	return (*uint16)(unsafe.Add(q.csums, uintptr(i&q.mask)*csumSize))
}

// Descriptor fields of an entry; each is read once into a local, never twice.
func descOff(e unsafe.Pointer) uint64    { return uint64(*(*uint32)(unsafe.Add(e, descOffOffset))) }
func descSize32(e unsafe.Pointer) uint32 { return *(*uint32)(unsafe.Add(e, descOffSize)) }
func descGSO(e unsafe.Pointer) uint64    { return *(*uint64)(unsafe.Add(e, descOffGSO)) }

// putDesc writes entry i; off is a region offset, below 4 GiB.
func (q *ring) putDesc(i uint32, off uint64, size uint32, gso uint64, csum uint16) {
	e := q.entry(i)
	*(*uint32)(unsafe.Add(e, descOffOffset)) = uint32(off)
	*(*uint32)(unsafe.Add(e, descOffSize)) = size
	*(*uint64)(unsafe.Add(e, descOffGSO)) = gso
	*q.csum(i) = csum
}

// publishBytes makes a side publish after this many frame bytes, whatever the count: large
// frames then stream one by one instead of arriving in bursts.
const publishBytes = 32 << 10

// publishEvery is how many entries a side moves before it publishes its index on its own,
// without waiting for Wakeup: often enough that a long batch streams, rarely enough that the
// index line does not bounce between the CPUs for every frame.
func publishEvery(size uint32) uint32 { return min(32, size/2) }

// producer is the writing side of a ring. Its own index lives here, privately: the copy in
// shared memory is only ever written, so a peer scribbling over it changes nothing for us.
type producer struct {
	ring
	head      uint32 // next entry to write
	published uint32 // head as last stored to shared memory
	tail      uint32 // the consumer's tail as last read, valid
	dirty     bool   // published since the consumer's armed flag was last checked
	badTail   uint32 // the last invalid tail counted, to count each once
	every     uint32
	bytes     uint32 // frame bytes put since the last publish
	invalid   uint64 // invalid tails seen
}

func newProducer(q ring) producer { return producer{ring: q, every: publishEvery(q.size)} }

// space reports whether one more entry fits, reading the consumer's tail only when the last
// view says full. A tail that would make the queue hold more than its size is invalid: the
// queue counts as full until the peer repairs it.
func (p *producer) space() bool {
	if p.head-p.tail < p.size {
		return true
	}
	t := p.ring.tail.Load()
	if p.head-t > p.size {
		if t != p.badTail {
			p.badTail = t
			p.invalid++
		}
		return false
	}
	p.tail = t
	return p.head-t < p.size
}

// room is how many entries fit, at most want (space for a batch): it reads the consumer's
// tail only when the last view has room for fewer, and validates it as space does.
func (p *producer) room(want uint32) uint32 {
	if r := p.size - (p.head - p.tail); r >= want {
		return want
	}
	t := p.ring.tail.Load()
	if p.head-t > p.size {
		if t != p.badTail {
			p.badTail = t
			p.invalid++
		}
		return 0
	}
	p.tail = t
	return min(want, p.size-(p.head-t))
}

// put writes d if there is space.
func (p *producer) put(off uint64, size uint32, gso uint64, csum uint16) bool {
	if !p.space() {
		return false
	}
	p.write(off, size, gso, csum)
	return true
}

// write puts d at head, which space or room found free, and publishes head now and then.
func (p *producer) write(off uint64, size uint32, gso uint64, csum uint16) {
	p.putDesc(p.head, off, size, gso, csum)
	p.head++
	p.bytes += min(size, publishBytes)
	if p.head-p.published >= p.every || p.bytes >= publishBytes {
		p.ring.head.Store(p.head)
		p.published = p.head
		p.dirty = true
		p.bytes = 0
	}
}

// publish stores head with a Swap, which the armed-flag protocol needs (see Waiter), also when
// write already stored it: the following load of the armed flag must not pass the store. Go's
// atomics are sequentially consistent, but the race detector models a Store as a release only,
// and a Swap is what the protocol's argument names (both are XCHG on amd64).
func (p *producer) publish() {
	if p.head != p.published || p.dirty {
		p.ring.head.Swap(p.head)
		p.published = p.head
		p.dirty = true
		p.bytes = 0
	}
}

// consumer is the reading side of a ring; like producer, its own index is private.
type consumer struct {
	ring
	tail      uint32 // next entry to read
	published uint32
	head      uint32 // the producer's head as last read, valid
	dirty     bool
	badHead   uint32
	every     uint32
	invalid   uint64
}

func newConsumer(q ring) consumer { return consumer{ring: q, every: publishEvery(q.size)} }

// avail reports whether an entry is ready, reading the producer's head only when the last view
// says empty. A head more than size ahead of our tail (or behind it) is invalid and reads as
// empty.
func (c *consumer) avail() bool {
	if c.head != c.tail {
		return true
	}
	h := c.ring.head.Load()
	if h-c.tail > c.size {
		if h != c.badHead {
			c.badHead = h
			c.invalid++
		}
		return false
	}
	c.head = h
	return h != c.tail
}

// ready is how many entries are ready, at most want (avail for a batch): it reads the
// producer's head only when the last view has fewer, and validates it as avail does.
func (c *consumer) ready(want uint32) uint32 {
	if n := c.head - c.tail; n >= want {
		return want
	}
	h := c.ring.head.Load()
	if h-c.tail > c.size {
		if h != c.badHead {
			c.badHead = h
			c.invalid++
		}
		return min(want, c.head-c.tail)
	}
	c.head = h
	return min(want, h-c.tail)
}

// peek returns the next entry, or nil. The caller copies each field (and csum(tail)) out once,
// then calls advance (which may publish the tail, handing the entry back to the producer).
func (c *consumer) peek() unsafe.Pointer {
	if c.head == c.tail && !c.avail() {
		return nil
	}
	return c.entry(c.tail)
}

// advance moves past n entries that peek or ready found.
func (c *consumer) advance(n uint32) {
	c.tail += n
	if c.tail-c.published >= c.every {
		c.ring.tail.Store(c.tail)
		c.published = c.tail
		c.dirty = true
	}
}

// publish is producer.publish for the tail.
func (c *consumer) publish() {
	if c.tail != c.published || c.dirty {
		c.ring.tail.Swap(c.tail) // a full barrier, as in producer.publish
		c.published = c.tail
		c.dirty = true
	}
}

// wants reports whether a peer armed flag asks for a signal after we published, and takes the
// flag: one signal per arming. The plain load first keeps the line shared while nobody sleeps.
func takeArmed(flag *atomic.Uint32) bool {
	return flag.Load() != 0 && flag.Swap(0) != 0
}
