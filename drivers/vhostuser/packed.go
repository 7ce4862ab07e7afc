package vhostuser

import (
	"sync/atomic"
)

// The packed virtqueue (virtio 1.1, 2.8), chosen per device by VIRTIO_F_RING_PACKED: one ring
// of 16-byte descriptors {addr, len, id, flags} that the driver makes available and the device
// marks used in place, each side with a wrap counter that flips at the ring's end, and two
// 4-byte event suppression structures {off_wrap, flags}: the driver's at the address of the
// avail ring, the device's at the used ring's. A buffer is a run of consecutive descriptors
// linked by NEXT, the last one's id naming it; the device writes one used descriptor per
// buffer at its used index and steps over as many slots as the buffer had. The same
// operations as the split ring's (pop, chain, push, publish, arm) serve it, so the net code
// and the control queue know no difference; everything read from the ring is the guest's
// and checked as the split ring's is.
const (
	featRingPacked = 1 << 34
	// featInOrder (VIRTIO_F_IN_ORDER): the device uses buffers in the order they were made
	// available, which it does on every queue of either ring type (one used entry per
	// buffer, not per batch).
	featInOrder = 1 << 35

	packedAvail = 1 << 7  // descriptor flags: available, as the driver's wrap counter
	packedUsed  = 1 << 15 // used, as the device's wrap counter

	eventEnable  = 0 // event suppression flags: notify always
	eventDisable = 1 // never
	eventDesc    = 2 // at off_wrap (EVENT_IDX)

	eventAreaLen = 4
)

// packedState is a packed ring's device side beside vring's indices (lastAvail and usedIdx
// are slots there, below num).
type packedState struct {
	packed    bool
	availWrap bool // the wrap counter at lastAvail
	usedWrap  bool // at usedIdx
	pubWrap   bool // at pubUsed
	// each popped buffer, by its first slot: how many slots, and its id
	slots, ids []uint16
	// the positions before the last pops, for unpop: a ring of num entries
	undo     []uint32 // lastAvail | availWrap<<16
	undoNext int
	missed   uint32 // the slot where pop last found nothing available | its wrap counter<<16
}

// setPacked makes q a packed ring (before its addresses are set) or a split one.
func (q *vring) setPacked(on bool) {
	q.packed = on
	if on && len(q.slots) != int(q.num) {
		q.slots, q.ids, q.undo = make([]uint16, q.num), make([]uint16, q.num), make([]uint32, q.num)
	}
}

// packedFlags reads descriptor i's flags (and id) in one load: the driver writes a head's
// flags last, after the descriptors of its buffer.
func (q *vring) packedFlags(i uint16) (flags, id uint16) {
	w := atomic.LoadUint32(q.word(q.desc[descLen*uint64(i)+12:]))
	return uint16(w >> 16), uint16(w)
}

// availableAt reports whether descriptor flags say available for the wrap counter wrap.
func availableAt(flags uint16, wrap bool) bool {
	return (flags&packedAvail != 0) == wrap && (flags&packedUsed != 0) != wrap
}

// popPacked is pop for a packed ring: the head is the buffer's first slot.
func (q *vring) popPacked() (head uint16, ok bool, err error) {
	i, wrap := q.lastAvail, q.availWrap
	flags, id := q.packedFlags(i)
	if !availableAt(flags, wrap) {
		q.missed = uint32(i) | b2u(wrap)<<16
		return 0, false, nil
	}
	n := uint16(1)
	for j := i; flags&descNext != 0; n++ {
		if n == q.num {
			return 0, false, q.faultf("buffer at slot %d longer than the queue's %d descriptors", i, q.num)
		}
		if j++; j == q.num {
			j, wrap = 0, !wrap
		}
		if flags, id = q.packedFlags(j); !availableAt(flags, wrap) {
			return 0, false, q.faultf("buffer at slot %d runs into slot %d, which is not available (flags %#x)", i, j, flags)
		}
	}
	if id >= q.num {
		return 0, false, q.faultf("buffer at slot %d has id %d of %d", i, id, q.num)
	}
	q.undo[q.undoNext] = uint32(q.lastAvail) | b2u(q.availWrap)<<16
	q.undoNext = (q.undoNext + 1) % len(q.undo)
	q.slots[i], q.ids[i] = n, id
	q.lastAvail, q.availWrap = advance(q.lastAvail, q.availWrap, n, q.num)
	if q.inf != nil {
		q.inflightTake(id)
	}
	return i, true, nil
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// advance steps slot i with wrap counter wrap n slots on.
func advance(i uint16, wrap bool, n, num uint16) (uint16, bool) {
	if j := uint32(i) + uint32(n); j >= uint32(num) {
		return uint16(j - uint32(num)), !wrap
	}
	return i + n, wrap
}

// unpopPacked gives back the last n buffers popped.
func (q *vring) unpopPacked(n int) {
	if n == 0 {
		return
	}
	q.undoNext = (q.undoNext - n + len(q.undo)) % len(q.undo)
	u := q.undo[q.undoNext]
	q.lastAvail, q.availWrap = uint16(u), u>>16 != 0
	if q.inf != nil {
		for i, k := q.lastAvail, 0; k < n; k++ { // the buffers given back, as popped
			q.inflightUntake(q.ids[i])
			i = (i + q.slots[i]) % q.num
		}
	}
}

// pushPacked marks the buffer at slot head used with n bytes written: its id and length in
// the descriptor at the used index, then its flags, which hand it to the driver.
func (q *vring) pushPacked(head uint16, n uint32) {
	d := q.desc[descLen*uint64(q.usedIdx):]
	le.PutUint32(d[8:], n)
	flags := uint32(0)
	if q.usedWrap {
		flags = packedAvail | packedUsed
	}
	next, wrap := advance(q.usedIdx, q.usedWrap, q.slots[head], q.num)
	if q.inf != nil {
		q.inflightPackedUsing(next, wrap)
	}
	atomic.StoreUint32(q.word(d[12:]), uint32(q.ids[head])|flags<<16)
	if q.inf != nil {
		q.inflightPackedUsed(q.ids[head])
	}
	q.usedIdx, q.usedWrap = next, wrap
}

// publishPacked reports whether the driver asked to be notified of what was pushed since the
// last publish. With its event at a descriptor (EVENT_IDX) the device notifies anyway: a
// spurious notification is allowed, a missed one is not.
func (q *vring) publishPacked() bool {
	if q.usedIdx == q.pubUsed && q.usedWrap == q.pubWrap {
		return false
	}
	q.pubUsed, q.pubWrap = q.usedIdx, q.usedWrap
	atomic.AddUint32(&q.fenceWord, 1) // the used descriptors before the driver's event is read
	return atomic.LoadUint32(q.word(q.avail))>>16&3 != eventDisable
}

// armPacked asks the driver for a kick and reports whether the slot where pop last found
// nothing is available now (as arm, not the buffers a frame gave back).
func (q *vring) armPacked() bool {
	q.usedFlags = eventEnable
	atomic.StoreUint32(q.word(q.used), uint32(eventEnable)<<16)
	atomic.AddUint32(&q.fenceWord, 1)
	flags, _ := q.packedFlags(uint16(q.missed))
	return availableAt(flags, q.missed>>16 != 0)
}

// disarmPacked tells the driver the device is busy and needs no kicks.
func (q *vring) disarmPacked() {
	if q.usedFlags != eventDisable {
		q.usedFlags = eventDisable
		atomic.StoreUint32(q.word(q.used), uint32(eventDisable)<<16)
	}
}

// packedBase is GET_VRING_BASE's value of a packed ring: the next slot and its wrap counter.
func (q *vring) packedBase() uint32 { return uint32(q.lastAvail) | b2u(q.availWrap)<<15 }

// setPackedBase takes SET_VRING_BASE's value for a packed ring: the driver's next slot and wrap
// counter, where the device's used index starts too.
func (q *vring) setPackedBase(v uint32) {
	q.lastAvail, q.availWrap = uint16(v&0x7fff), v&(1<<15) != 0
	q.usedIdx, q.usedWrap = q.lastAvail, q.availWrap
	q.pubUsed, q.pubWrap = q.usedIdx, q.usedWrap
}
