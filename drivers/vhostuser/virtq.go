package vhostuser

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// The split virtqueue's layout (virtio 1.x, 2.7): a descriptor table of 16-byte entries, the
// driver's avail ring (flags, idx, ring[num], used_event) and the device's used ring (flags,
// idx, ring[num] of {id, len}, avail_event).
const (
	descLen = 16

	descNext     = 1
	descWrite    = 2
	descIndirect = 4

	availNoInterrupt = 1 // avail flags: the driver wants no call (without EVENT_IDX)
	usedNoNotify     = 1 // used flags: the device wants no kick (without EVENT_IDX)

	// maxQueueSize is the largest ring taken: virtio allows 32768, a size no uint16 holds;
	// QEMU's largest is 1024.
	maxQueueSize = 16384
)

func availLen(num uint16) uint64 { return 6 + 2*uint64(num) }
func usedLen(num uint16) uint64  { return 6 + 8*uint64(num) }

// vring is one split virtqueue as the device sees it: its three areas translated into guest
// memory, and the device's own indices. Everything read from the areas is the guest's and
// checked before use; each value is read once.
type vring struct {
	name     string // "rx queue 0", for log lines
	num      uint16
	eventIdx bool

	desc, avail, used []byte

	lastAvail uint16 // the next avail entry the device takes
	availIdx  uint16 // the driver's avail idx as last read
	usedIdx   uint16 // the next used entry the device fills
	pubUsed   uint16 // the used idx the driver has been shown
	usedFlags uint16
	fenceWord uint32
	packedState

	// The ring's part of the inflight region (inflight.go), nil without one: the header's
	// and each entry's length, and the next entry's counter.
	inf            []byte
	infHdr, infEnt int
	infCounter     uint64
}

// fault is a guest's error in a queue: the device stops processing until the driver resets it.
type fault struct {
	queue string
	what  string
}

func (f *fault) Error() string { return f.queue + ": " + f.what }

func (q *vring) faultf(format string, a ...any) error {
	return &fault{queue: q.name, what: fmt.Sprintf(format, a...)}
}

// setAreas points the ring at its areas: desc, avail and used are the translated areas of a
// queue of num entries, or nil where the address lies outside guest memory.
func (q *vring) setAreas(desc, avail, used []byte) error {
	switch {
	case desc == nil:
		return q.faultf("descriptor table (%d entries) outside guest memory", q.num)
	case avail == nil:
		return q.faultf("avail ring outside guest memory")
	case used == nil:
		return q.faultf("used ring outside guest memory")
	case uintptr(unsafe.Pointer(&desc[0]))%16 != 0:
		return q.faultf("descriptor table not 16-byte aligned")
	case uintptr(unsafe.Pointer(&avail[0]))%4 != 0:
		// The spec asks 2; Linux puts the ring behind the descriptor table. The device reads
		// flags and idx together, atomically.
		return q.faultf("avail ring not 4-byte aligned")
	case uintptr(unsafe.Pointer(&used[0]))%4 != 0:
		return q.faultf("used ring not 4-byte aligned")
	}
	q.desc, q.avail, q.used = desc, avail, used
	return nil
}

func (q *vring) word(b []byte) *uint32 { return (*uint32)(unsafe.Pointer(&b[0])) }

// loadAvail reads the driver's avail flags and idx.
func (q *vring) loadAvail() (flags, idx uint16) {
	w := atomic.LoadUint32(q.word(q.avail))
	return uint16(w), uint16(w >> 16)
}

// pop takes the head of the next available chain; ok is false when the driver has posted
// none. An avail idx more than a queue ahead, or a head out of range, is a fault.
func (q *vring) pop() (head uint16, ok bool, err error) {
	if q.packed {
		return q.popPacked()
	}
	if q.lastAvail == q.availIdx {
		_, q.availIdx = q.loadAvail()
		if q.lastAvail == q.availIdx {
			return 0, false, nil
		}
		if d := q.availIdx - q.lastAvail; d > q.num {
			return 0, false, q.faultf("avail idx %d is %d entries ahead of the device's %d, more than the queue's %d", q.availIdx, d, q.lastAvail, q.num)
		}
	}
	slot := 4 + 2*uint64(q.lastAvail%q.num)
	head = le.Uint16(q.avail[slot:])
	if head >= q.num {
		return 0, false, q.faultf("avail entry %d names descriptor %d of %d", q.lastAvail, head, q.num)
	}
	q.lastAvail++
	if q.inf != nil {
		q.inflightTakeSplit(head)
	}
	return head, true, nil
}

// unpop gives back the last n chains pop took (a frame that found too little room).
func (q *vring) unpop(n int) {
	if q.packed {
		q.unpopPacked(n)
		return
	}
	for range n {
		q.lastAvail--
		if q.inf != nil {
			q.inflightUntake(le.Uint16(q.avail[4+2*uint64(q.lastAvail%q.num):]))
		}
	}
}

// push puts a finished chain in the used ring; publish shows it to the driver.
func (q *vring) push(head uint16, n uint32) {
	if q.packed {
		q.pushPacked(head, n)
		return
	}
	e := q.used[4+8*uint64(q.usedIdx%q.num):]
	le.PutUint32(e, uint32(head))
	le.PutUint32(e[4:], n)
	q.usedIdx++
}

// publish makes the pushed entries visible and reports whether the driver asked to be
// called for them: with EVENT_IDX when they pass its used_event, without unless it set
// NO_INTERRUPT.
func (q *vring) publish() bool {
	if q.packed {
		return q.publishPacked()
	}
	if q.usedIdx == q.pubUsed {
		return false
	}
	old := q.pubUsed
	q.pubUsed = q.usedIdx
	// A full barrier on amd64 (XCHG): the entries before idx, and idx before used_event is read.
	atomic.StoreUint32(q.word(q.used), uint32(q.usedFlags)|uint32(q.pubUsed)<<16)
	if q.inf != nil {
		q.inflightSplitPublished(q.pubUsed - old)
	}
	if q.eventIdx {
		event := le.Uint16(q.avail[4+2*uint64(q.num):])
		return q.pubUsed-event-1 < q.pubUsed-old // vring_need_event
	}
	flags, _ := q.loadAvail()
	return flags&availNoInterrupt == 0
}

// arm asks the driver for a kick when it posts past the avail idx pop last found, and reports
// whether it already has (then the device goes on without waiting). Only a buffer past that
// one counts: a frame that found too few buffers gave back those it took, which are still no
// room for it (issue 32), and a driver with EVENT_IDX kicks only at an avail_event it has not
// passed yet.
func (q *vring) arm() bool {
	if q.packed {
		return q.armPacked()
	}
	seen := q.availIdx
	if q.eventIdx {
		le.PutUint16(q.used[4+8*uint64(q.num):], seen)
	} else {
		q.usedFlags = 0
		atomic.StoreUint32(q.word(q.used), uint32(q.usedFlags)|uint32(q.pubUsed)<<16)
	}
	atomic.AddUint32(&q.fenceWord, 1) // the request before the driver's idx is read again
	_, q.availIdx = q.loadAvail()
	return q.availIdx != seen
}

// disarm tells a driver without EVENT_IDX that the device is busy and needs no kicks. With
// EVENT_IDX the avail_event written by arm has passed, which does the same.
func (q *vring) disarm() {
	if q.packed {
		q.disarmPacked()
		return
	}
	if !q.eventIdx && q.usedFlags == 0 {
		q.usedFlags = usedNoNotify
		atomic.StoreUint32(q.word(q.used), uint32(q.usedFlags)|uint32(q.pubUsed)<<16)
	}
}

// chain walks the descriptor chain from head. It follows at most num descriptors (a loop
// is a fault) and checks each index, flag and buffer against the table and guest memory.
type chain struct {
	q     *vring
	mem   *memTable
	next  uint16
	n     uint16
	more  bool
	write bool // a device-writable descriptor came: only such may follow
}

func (q *vring) chain(mem *memTable, head uint16) chain {
	return chain{q: q, mem: mem, next: head, more: true}
}

// buffer returns the next buffer of the chain and whether the device may write it; nil at
// the chain's end.
func (c *chain) buffer() (buf []byte, write bool, err error) {
	q := c.q
	for c.more {
		if c.n == q.num {
			return nil, false, q.faultf("descriptor chain longer than the queue's %d entries (a loop)", q.num)
		}
		c.n++
		i := c.next
		d := q.desc[descLen*uint64(i):]
		addr, n, flags, next := le.Uint64(d), le.Uint32(d[8:]), le.Uint16(d[12:]), le.Uint16(d[14:])
		known := uint16(descNext | descWrite)
		if q.packed {
			// Consecutive slots; the id (where split has flags) is read by pop.
			flags, next, known = le.Uint16(d[14:]), (i+1)%q.num, known|packedAvail|packedUsed
		}
		if flags&descIndirect != 0 {
			return nil, false, q.faultf("descriptor %d is indirect, which was not negotiated", i)
		}
		if flags&^known != 0 {
			return nil, false, q.faultf("descriptor %d has unknown flags %#x", i, flags)
		}
		write = flags&descWrite != 0
		if c.write && !write {
			return nil, false, q.faultf("descriptor %d is readable after a writable one", i)
		}
		c.write = write
		c.more = flags&descNext != 0
		if c.more {
			if next >= q.num {
				return nil, false, q.faultf("descriptor %d chains to %d of %d", i, next, q.num)
			}
			c.next = next
		}
		if n == 0 {
			continue
		}
		if buf = c.mem.guest(addr, n); buf == nil {
			return nil, false, q.faultf("descriptor %d: %d bytes at guest address %#x lie outside guest memory", i, n, addr)
		}
		return buf, write, nil
	}
	return nil, false, nil
}
