package vhostuser

// Inflight I/O tracking (vhost-user's VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD): a shared memory
// region the back end makes (GET_INFLIGHT_FD) and the front end hands back after a reconnect
// (SET_INFLIGHT_FD), in which the back end notes per ring which descriptors it has taken and
// not yet returned, and where its used index stands. The layouts are the spec's (QEMU's
// docs/interop/vhost-user.rst, "Inflight I/O tracking"), per queue at i times the queue's
// part:
//
//	split:  features u64, version u16, desc_num u16, last_batch_head u16, used_idx u16,
//	        then desc_num entries of 16 bytes {inflight u8, padding [5]u8, next u16, counter u64}
//	packed: features u64, version u16, desc_num u16, free_head u16, old_free_head u16,
//	        used_idx u16, old_used_idx u16, used_wrap_counter u8, old_used_wrap_counter u8,
//	        padding [7]u8, then desc_num entries of 32 bytes {inflight u8, padding u8, next u16,
//	        last u16, num u16, counter u64, id u16, flags u16, len u32, addr u64}
//
// The device completes in order (IN_ORDER or not), so a descriptor's entry is indexed by the
// split ring's head or the packed buffer's id, and neither the split layout's list of the last
// batch (last_batch_head, next: the used ring's entries past used_idx name that batch) and
// counter (the avail ring holds the order) nor the packed layout's free list is used. The data
// path's cost is a store into the region per split chain taken and one when it is published (a
// packed buffer: a few), no system call.
//
// What the region buys a takeover (takeover.go): a packed ring's position, which is in no index
// the driver was shown: the device's used slot and wrap counter, where it also takes again.
// For a split ring the used index in guest memory says the same; the region is checked
// against it. Descriptors inflight at the crash are resubmitted: the ring resumes at the used
// index, and the chains the dead process took are taken again in their order. Frames in them
// had not left the dead process (a batch is published before Read returns it), so none is
// lost or duplicated.

import (
	"fmt"
	"math/bits"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

const (
	protoInflight = 1 << 12 // VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD

	inflightVersion   = 1
	inflightAlign     = 64
	splitInflightHdr  = 16
	splitInflightEnt  = 16
	packedInflightHdr = 32
	packedInflightEnt = 32
	inflightDescLen   = 24 // the message's payload: mmap_size, mmap_offset, num_queues, queue_size
)

// canMakeRegion reports whether this process can make an inflight region: a seccomp filter
// may refuse memfd_create (runtime/sandbox allows it), and INFLIGHT_SHMFD is offered only
// when it can.
func canMakeRegion() bool {
	fd, err := unix.MemfdCreate("vhost-user-inflight", unix.MFD_CLOEXEC)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// inflightDesc is GET_ and SET_INFLIGHT_FD's payload.
type inflightDesc struct {
	mmapSize, mmapOffset uint64
	queues, queueSize    uint16
}

// inflightQueueLen is one queue's part of the region (aligned as DPDK and libvhost-user do).
func inflightQueueLen(packed bool, num uint16) uint64 {
	n := splitInflightHdr + splitInflightEnt*uint64(num)
	if packed {
		n = 29 + packedInflightEnt*uint64(num) // the header's fields, without its padding
	}
	return (n + inflightAlign - 1) &^ (inflightAlign - 1)
}

// inflightRegion is the device's mapping of the region.
type inflightRegion struct {
	desc    inflightDesc
	packed  bool
	fd      int
	mem     []byte // the region
	mapping []byte // what mmap returned
}

// part is queue i's part of the region.
func (r *inflightRegion) part(i int) []byte {
	n := inflightQueueLen(r.packed, r.desc.queueSize)
	return r.mem[uint64(i)*n : uint64(i+1)*n]
}

func (r *inflightRegion) unmap() {
	if r == nil {
		return
	}
	unix.Munmap(r.mapping)
	unix.Close(r.fd)
}

// checkInflightDesc checks a payload's queue count and size against the device.
func (d *Device) checkInflightDesc(name string, m inflightDesc) error {
	if m.queues == 0 || int(m.queues) > len(d.q) {
		return fmt.Errorf("%s: num_queues %d, the device has %d", name, m.queues, len(d.q))
	}
	if m.queueSize == 0 || m.queueSize > maxQueueSize || bits.OnesCount16(m.queueSize) != 1 {
		return fmt.Errorf("%s: queue_size %d is not a power of 2 up to %d", name, m.queueSize, maxQueueSize)
	}
	return nil
}

// mapInflight maps the region of m from fd (which it takes: kept, or closed on failure).
func mapInflight(name string, fd int, m inflightDesc, packed bool) (*inflightRegion, error) {
	want := uint64(m.queues) * inflightQueueLen(packed, m.queueSize)
	fail := func(err error) (*inflightRegion, error) {
		unix.Close(fd)
		return nil, err
	}
	if m.mmapSize != want {
		return fail(fmt.Errorf("%s: mmap_size %d, %d queues of %d entries take %d", name, m.mmapSize, m.queues, m.queueSize, want))
	}
	if m.mmapOffset > 1<<40 {
		return fail(fmt.Errorf("%s: mmap_offset %d is out of range", name, m.mmapOffset))
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(fmt.Errorf("%s: %w", name, err))
	}
	if uint64(st.Size) < m.mmapOffset+m.mmapSize {
		return fail(fmt.Errorf("%s: the region ends at byte %d of its descriptor, which has %d", name, m.mmapOffset+m.mmapSize, st.Size))
	}
	page := uint64(os.Getpagesize())
	start := m.mmapOffset &^ (page - 1)
	mp, err := unix.Mmap(fd, int64(start), int(m.mmapOffset-start+m.mmapSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail(fmt.Errorf("%s: mapping %d bytes: %w", name, m.mmapSize, err))
	}
	skip := m.mmapOffset - start
	return &inflightRegion{desc: m, packed: packed, fd: fd, mem: mp[skip : skip+m.mmapSize : skip+m.mmapSize], mapping: mp}, nil
}

// getInflight makes a fresh region for m's queues in the negotiated ring layout: a memfd, zero
// but for each queue's version and desc_num. It returns the reply's payload and descriptor.
func (d *Device) getInflight(m *message) ([]byte, int, error) {
	d.mu.Lock()
	packed, ok := d.features&featRingPacked != 0, d.protocol&protoInflight != 0
	d.mu.Unlock()
	if !ok {
		return nil, -1, fmt.Errorf("GET_INFLIGHT_FD: INFLIGHT_SHMFD was not negotiated")
	}
	desc := m.inflight
	if err := d.checkInflightDesc("GET_INFLIGHT_FD", desc); err != nil {
		return nil, -1, err
	}
	desc.mmapSize, desc.mmapOffset = uint64(desc.queues)*inflightQueueLen(packed, desc.queueSize), 0
	fd, err := unix.MemfdCreate("vhost-user-inflight", unix.MFD_CLOEXEC)
	if err == nil {
		err = unix.Ftruncate(fd, int64(desc.mmapSize))
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		return nil, -1, fmt.Errorf("GET_INFLIGHT_FD: %w", err)
	}
	r, err := mapInflight("GET_INFLIGHT_FD", fd, desc, packed)
	if err != nil {
		return nil, -1, err
	}
	for i := range int(desc.queues) {
		p := r.part(i)
		le.PutUint16(p[8:], inflightVersion)
		le.PutUint16(p[10:], desc.queueSize)
	}
	out, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		r.unmap()
		return nil, -1, fmt.Errorf("GET_INFLIGHT_FD: %w", err)
	}
	d.setInflight(r)
	return appendInflightDesc(nil, desc), out, nil
}

func appendInflightDesc(b []byte, m inflightDesc) []byte {
	b = le.AppendUint64(le.AppendUint64(b, m.mmapSize), m.mmapOffset)
	return le.AppendUint32(le.AppendUint16(le.AppendUint16(b, m.queues), m.queueSize), 0)
}

// setInflightFD takes the region a front end hands back (SET_INFLIGHT_FD, or a takeover's).
func (d *Device) setInflightFD(m *message, fds []int) error {
	d.mu.Lock()
	packed, ok := d.features&featRingPacked != 0, d.protocol&protoInflight != 0
	d.mu.Unlock()
	if !ok {
		closeAll(fds)
		return fmt.Errorf("SET_INFLIGHT_FD: INFLIGHT_SHMFD was not negotiated")
	}
	if err := d.checkInflightDesc("SET_INFLIGHT_FD", m.inflight); err != nil {
		closeAll(fds)
		return err
	}
	r, err := mapInflight("SET_INFLIGHT_FD", fds[0], m.inflight, packed)
	if err != nil {
		return err
	}
	d.setInflight(r)
	return nil
}

// setInflight makes r the device's region; running rings start tracking in it.
func (d *Device) setInflight(r *inflightRegion) {
	unlock := d.lockAll()
	old := d.inflight
	d.inflight = r
	for i := range d.q {
		q := &d.q[i]
		q.inf = nil
		if q.started {
			if err := d.attachInflight(i, q); err != nil {
				d.log.Warn("the ring is not tracked in the inflight region", "queue", q.name, "err", err)
			}
		}
	}
	unlock()
	old.unmap()
}

// attachInflight starts tracking ring i in the device's region, if it has one (q.mu held, the
// ring starting): its part is reset to the ring's positions, nothing inflight.
func (d *Device) attachInflight(i int, q *queue) error {
	q.inf = nil
	r := d.inflight
	if r == nil {
		return nil
	}
	if i >= int(r.desc.queues) {
		return q.faultf("the inflight region holds %d queues", r.desc.queues)
	}
	if r.desc.queueSize != q.num || r.packed != q.packed {
		return q.faultf("the inflight region is for %d-entry queues (packed %v), the ring has %d (packed %v)", r.desc.queueSize, r.packed, q.num, q.packed)
	}
	p := r.part(i)
	clear(p)
	le.PutUint16(p[8:], inflightVersion)
	le.PutUint16(p[10:], q.num)
	if q.packed {
		le.PutUint16(p[16:], q.usedIdx)
		le.PutUint16(p[18:], q.usedIdx)
		p[20], p[21] = byte(b2u(q.usedWrap)), byte(b2u(q.usedWrap))
		q.infHdr, q.infEnt = packedInflightHdr, packedInflightEnt
	} else {
		le.PutUint16(p[14:], q.pubUsed)
		q.infHdr, q.infEnt = splitInflightHdr, splitInflightEnt
	}
	q.inf, q.infCounter = p, 1
	return nil
}

// The data path's marks (q.inf non-nil; its queue's lock held).

// entry is the state of descriptor (split: head, packed: buffer id) i.
func (q *vring) entry(i uint16) []byte {
	return q.inf[q.infHdr+q.infEnt*int(i):][:q.infEnt:q.infEnt]
}

// inflightTakeSplit marks a split ring's chain at head i taken: the avail ring holds the
// order of taking, so the entry's counter is not written.
func (q *vring) inflightTakeSplit(i uint16) { q.inf[q.infHdr+q.infEnt*int(i)] = 1 }

// inflightTake marks a packed ring's buffer i taken, in the order of taking.
func (q *vring) inflightTake(i uint16) {
	off := q.infHdr + q.infEnt*int(i)
	le.PutUint64(q.inf[off+8:], q.infCounter)
	q.inf[off] = 1
	q.infCounter++
}

// inflightSplitPublished clears the batch of n chains just published, which the used ring
// names, and notes the used index: a crash before this leaves used_idx behind the used ring's,
// and the used ring's entries between the two name what a takeover clears.
func (q *vring) inflightSplitPublished(n uint16) {
	for i := q.pubUsed - n; i != q.pubUsed; i++ {
		if h := le.Uint32(q.used[4+8*uint64(i%q.num):]); h < uint32(q.num) { // the guest's memory
			q.inf[q.infHdr+q.infEnt*int(h)] = 0
		}
	}
	le.PutUint16(q.inf[14:], q.pubUsed)
}

// inflightPackedUsing notes the used slot and wrap counter past the buffer about to be marked
// used; inflightPackedUsed, once it is, clears the buffer and confirms them. A crash between
// the two leaves them apart, and the buffer's used flags say which holds.
func (q *vring) inflightPackedUsing(next uint16, wrap bool) {
	le.PutUint16(q.inf[16:], next)
	q.inf[20] = byte(b2u(wrap))
}

func (q *vring) inflightPackedUsed(id uint16) {
	q.entry(id)[0] = 0
	le.PutUint16(q.inf[18:], le.Uint16(q.inf[16:]))
	q.inf[21] = q.inf[20]
}

// inflightUntake clears descriptor i, given back untaken (unpop).
func (q *vring) inflightUntake(i uint16) {
	if i < q.num {
		q.entry(i)[0] = 0
	}
}

// A takeover's reading of the region (takeover.go): everything in it is untrusted.

// inflightEntry is one descriptor the region says is inflight.
type inflightEntry struct {
	i       uint16
	counter uint64
}

// resumeInflight reads ring q's part p of the dead process's region (q.mu held, the ring's
// areas translated, q.usedIdx read from the split ring's used idx) and returns the base the
// ring resumes at: the used position, where the chains inflight at the crash are taken again.
// A region that disagrees with the ring is refused, naming the field.
func (q *queue) resumeInflight(p []byte, packed bool) (uint32, error) {
	hdr, ent := splitInflightHdr, splitInflightEnt
	if packed {
		hdr, ent = packedInflightHdr, packedInflightEnt
	}
	if uint64(len(p)) < uint64(hdr)+uint64(ent)*uint64(q.num) {
		return 0, q.faultf("inflight region: %d bytes for %d entries", len(p), q.num)
	}
	if v := le.Uint16(p[8:]); v != inflightVersion {
		return 0, q.faultf("inflight region: version %d, want %d", v, inflightVersion)
	}
	if n := le.Uint16(p[10:]); n != q.num {
		return 0, q.faultf("inflight region: desc_num %d, the ring has %d", n, q.num)
	}
	entry := func(i uint16) []byte { return p[hdr+ent*int(i):][:ent:ent] }
	var list []inflightEntry
	for i := range q.num {
		switch e := entry(i); e[0] {
		case 0:
		case 1:
			list = append(list, inflightEntry{i, le.Uint64(e[8:])})
		default:
			return 0, q.faultf("inflight region: descriptor %d: inflight %d", i, e[0])
		}
	}
	slices.SortFunc(list, func(a, b inflightEntry) int {
		switch {
		case a.counter < b.counter:
			return -1
		case a.counter > b.counter:
			return 1
		}
		return 0
	})
	if packed {
		return q.resumePacked(p, list)
	}
	return q.resumeSplit(p, list)
}

// resumeSplit mends the last batch (published, not yet cleared) and checks that the chains
// still inflight are the driver's next ones from the used index (in their order: in the avail
// ring's).
func (q *queue) resumeSplit(p []byte, list []inflightEntry) (uint32, error) {
	used := q.usedIdx
	if last := le.Uint16(p[14:]); last != used {
		batch := used - last
		if batch > q.num {
			return 0, q.faultf("inflight region: used_idx %d is %d behind the used ring's %d", last, batch, used)
		}
		for i := last; i != used; i++ {
			h := le.Uint32(q.used[4+8*uint64(i%q.num):])
			if h >= uint32(q.num) {
				return 0, q.faultf("inflight region: used entry %d of the last batch (past used_idx %d) names descriptor %d of %d", i, last, h, q.num)
			}
			list = slices.DeleteFunc(list, func(x inflightEntry) bool { return uint32(x.i) == h })
		}
	}
	_, availIdx := q.loadAvail()
	if ahead := availIdx - used; int(ahead) < len(list) || ahead > q.num {
		return 0, q.faultf("inflight region: %d descriptors inflight, the driver made %d available past used index %d", len(list), ahead, used)
	}
	inflight := make([]bool, q.num)
	for _, e := range list {
		inflight[e.i] = true
	}
	for k := range uint16(len(list)) {
		slot := used + k
		h := le.Uint16(q.avail[4+2*uint64(slot%q.num):])
		if h >= q.num || !inflight[h] {
			return 0, q.faultf("inflight region: %d descriptors inflight, but avail entry %d names %d, which is not", len(list), slot, h)
		}
		inflight[h] = false // a head twice in the avail ring is caught too
	}
	return uint32(used), nil
}

// resumePacked finds the used slot and wrap counter (committing the buffer marked used when the
// crash came between the region's two notes, rolling back otherwise) and checks that the
// buffers still inflight are the next ones available from there, in order.
func (q *queue) resumePacked(p []byte, list []inflightEntry) (uint32, error) {
	used, old := le.Uint16(p[16:]), le.Uint16(p[18:])
	wrap, oldWrap := p[20], p[21]
	switch {
	case used >= q.num:
		return 0, q.faultf("inflight region: used_idx %d of %d", used, q.num)
	case old >= q.num:
		return 0, q.faultf("inflight region: old_used_idx %d of %d", old, q.num)
	case wrap > 1:
		return 0, q.faultf("inflight region: used_wrap_counter %d", wrap)
	case oldWrap > 1:
		return 0, q.faultf("inflight region: old_used_wrap_counter %d", oldWrap)
	}
	if used != old || wrap != oldWrap {
		// The buffer at old was being marked used: if its slot no longer says available, it
		// was, and it is the first inflight.
		if flags, _ := q.packedFlags(old); !availableAt(flags, oldWrap == 1) {
			old, oldWrap = used, wrap
			if len(list) > 0 {
				list = list[1:]
			}
		}
	}
	i, w := old, oldWrap == 1
	for k, e := range list {
		flags, id := q.packedFlags(i)
		n := uint16(1)
		for j, jw := i, w; ; n++ {
			if !availableAt(flags, jw) {
				return 0, q.faultf("inflight region: buffer %d is inflight as the %d. taken, but slot %d is not available (flags %#x)", e.i, k+1, j, flags)
			}
			if flags&descNext == 0 {
				break
			}
			if n == q.num {
				return 0, q.faultf("inflight region: the buffer at slot %d is longer than the ring", i)
			}
			if j++; j == q.num {
				j, jw = 0, !jw
			}
			flags, id = q.packedFlags(j)
		}
		if id != e.i {
			return 0, q.faultf("inflight region: buffer %d is inflight as the %d. taken, but the buffer at slot %d has id %d", e.i, k+1, i, id)
		}
		i, w = advance(i, w, n, q.num)
	}
	return uint32(old) | uint32(oldWrap)<<15, nil
}
