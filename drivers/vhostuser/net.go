package vhostuser

import (
	"runtime/debug"
	"time"

	"github.com/nicstack/nicstack/drivers/tap/vnethdr"
	"github.com/nicstack/nicstack/netdev"
)

// rxWait (Device.rxWait) bounds how long Write waits for the guest to post receive buffers before it drops
// the rest of its batch: a guest that stopped receiving must not hold up the router.
const rxWait = 20 * time.Millisecond

// maxHdrLen is struct virtio_net_hdr_v1: the legacy header and num_buffers.
const maxHdrLen = 12

// Read waits until the guest has sent frames, then takes a batch from its transmit queue
// (pair 0's; Pair(p).Read another pair's): frame i into bufs[i][:sizes[i]] with its
// virtio-net header as offs[i]. A frame too large for its buffer, or whose header is invalid
// or uses an offload the guest did not negotiate, is dropped and counted. Once the device is
// broken Read waits for a reset (or the end of the connection, then ErrClosed).
func (d *Device) Read(bufs [][]byte, sizes []int, offs []netdev.Offload) (n int, err error) {
	return d.read(0, bufs, sizes, offs)
}

// ReadTo is Read into the buffers t hands out (netdev.DirectReader): a frame is copied once,
// from the guest's buffers into t's, where Read's caller copies it again. A
// netdev.SizedTarget is asked for a buffer of the frame's size, which the chain's
// descriptors give before the copy.
func (d *Device) ReadTo(t netdev.Target) (int, error) { return d.readTo(0, t) }

// readBatch takes frames into t's buffers until t hands out no more or the queue runs empty;
// with none it has armed the kick and returns the kicker to wait on (nil: wait for the queue
// to change).
func (d *Device) readBatch(p int, q *queue, t netdev.Target) (n int, k *kicker, err error) {
	t.Begin()
	defer t.End()
	q.mu.Lock()
	defer q.mu.Unlock()
	if d.broken.Load() || !q.ready() || !d.inUse(p) {
		return 0, nil, nil
	}
	sized, _ := t.(netdev.SizedTarget)
	q.disarm()
	var bytes, dropped uint64
	for {
		head, ok, perr := q.pop()
		if perr != nil {
			err = perr
			break
		}
		if !ok {
			if n == 0 && q.arm() {
				continue // posted meanwhile
			}
			if n == 0 {
				k = q.kick
			}
			break
		}
		var buf []byte
		if sized != nil {
			size, lerr := d.frameLen(q, head)
			if lerr != nil {
				err = lerr
				break
			}
			buf = sized.BufferOf(size)
		} else {
			buf = t.Buffer()
		}
		if buf == nil {
			q.unpop(1) // t is full: the chain waits for the next batch
			break
		}
		size, good, cerr := d.copyOut(q, head, buf, &q.off)
		if cerr != nil {
			t.Frame(0, nil)
			err = cerr
			break
		}
		q.push(head, 0)
		if !good || size == 0 {
			t.Frame(0, nil)
			dropped++
			continue
		}
		t.Frame(size, &q.off)
		bytes += uint64(size)
		n++
	}
	if q.publish() && q.call >= 0 {
		signal(q.call)
		d.stats.Calls.Add(1)
	}
	d.stats.RxFrames.Add(uint64(n))
	if q.frames != nil {
		q.frames.Add(uint64(n))
	}
	d.stats.RxBytes.Add(bytes)
	if dropped > 0 {
		d.stats.RxDropped.Add(dropped)
	}
	return n, k, err
}

// frameLen is the size of the frame in the chain at head: its buffers' bytes without the
// header. copyOut checks the chain as it copies; this walk only adds up.
func (d *Device) frameLen(q *queue, head uint16) (int, error) {
	c := q.chain(q.mem, head)
	n := 0
	for {
		b, _, err := c.buffer()
		if err != nil {
			return 0, err
		}
		if b == nil {
			return max(n-d.hdrLen, 0), nil
		}
		n += len(b)
	}
}

// copyOut copies the frame of the chain at head into buf (its header into off): good is false
// for a frame to drop.
func (d *Device) copyOut(q *queue, head uint16, buf []byte, off *netdev.Offload) (size int, good bool, err error) {
	c := q.chain(q.mem, head)
	hdr := q.hdr[:d.hdrLen]
	h, over := 0, false
	for {
		b, write, err := c.buffer()
		if err != nil {
			return 0, false, err
		}
		if b == nil {
			break
		}
		if write {
			return 0, false, q.faultf("descriptor chain at %d has a device-writable buffer in the transmit queue", head)
		}
		if h < len(hdr) {
			k := copy(hdr[h:], b)
			h += k
			b = b[k:]
		}
		if len(b) > len(buf)-size {
			over = true
			continue
		}
		size += copy(buf[size:], b)
	}
	if h < len(hdr) || over || !d.decodeHeader(hdr, buf[:size], off) {
		return 0, false, nil
	}
	return size, true, nil
}

// decodeHeader reads the guest's virtio-net header h of frame into o: false when it is invalid
// or asks for an offload the guest did not negotiate (virtio 1.x: little-endian).
func (d *Device) decodeHeader(h, frame []byte, o *netdev.Offload) bool {
	*o = netdev.Offload{Flags: h[0], GSOType: h[1], HdrLen: le.Uint16(h[2:]), GSOSize: le.Uint16(h[4:]),
		CsumStart: le.Uint16(h[6:]), CsumOffset: le.Uint16(h[8:])}
	return negotiated(o, d.features, featCsum, featHostTSO4, featHostTSO6, featHostECN) && vnethdr.Fix(frame, o)
}

// negotiated reports whether features f hold what o needs, given the bits of one direction:
// a partial checksum, TCP segmentation for IPv4 and IPv6, ECN.
func negotiated(o *netdev.Offload, f, csum, tso4, tso6, ecn uint64) bool {
	if o.Flags&netdev.OffloadNeedsCsum != 0 && f&csum == 0 {
		return false
	}
	need := uint64(0)
	switch o.GSOType &^ netdev.GSOECN {
	case netdev.GSONone:
	case netdev.GSOTCPv4:
		need = tso4
	case netdev.GSOTCPv6:
		need = tso6
	default:
		return false
	}
	if o.GSOType&netdev.GSOECN != 0 {
		need |= ecn
	}
	return f&need == need
}

// putHeader writes o as a virtio-net header into h (little-endian), num_buffers aside.
func putHeader(h []byte, o *netdev.Offload) {
	h[0], h[1] = o.Flags, o.GSOType
	le.PutUint16(h[2:], o.HdrLen)
	le.PutUint16(h[4:], o.GSOSize)
	le.PutUint16(h[6:], o.CsumStart)
	le.PutUint16(h[8:], o.CsumOffset)
}

// txState is Write's scratch.
type txState struct {
	hdr     [maxHdrLen]byte
	live    [MaxQueuePairs]int // the pairs a batch is spread over
	pair    []uint8            // each frame's pair
	sub     [][]byte           // one pair's frames
	subOffs []netdev.Offload
}

// writeQueue hands frames to the guest through receive queue q, each with its offload metadata as
// the virtio-net header, spread over several buffers with MRG_RXBUF. While the guest has
// posted too few buffers Write waits for its kick, at most rxWait, then drops the rest of the
// batch; frames with offloads the guest did not negotiate, or larger than its buffers, are
// dropped. All frames are taken unless the connection has ended.
func (d *Device) writeQueue(q *queue, bufs [][]byte, offs []netdev.Offload) (int, error) {
	defer d.guard(q, debug.SetPanicOnFault(true))
	i := 0
	for i < len(bufs) {
		if d.closed.Load() {
			return i, ErrClosed
		}
		var o []netdev.Offload
		if offs != nil {
			o = offs[i:]
		}
		n, k, full, err := d.writeBatch(q, bufs[i:], o)
		i += n
		if err != nil {
			d.breakDown(err, q)
			continue
		}
		if i == len(bufs) {
			break
		}
		if !full || !q.waitFor(k, time.Now().Add(d.rxWait)) {
			d.stats.TxDropped.Add(uint64(len(bufs) - i))
			break
		}
		if k != nil {
			d.stats.Kicks.Add(1)
		}
	}
	return len(bufs), nil
}

// writeBatch places frames until the guest's buffers run out (full, with the kicker to wait
// on) or the device cannot run; it returns how many frames it took.
func (d *Device) writeBatch(q *queue, bufs [][]byte, offs []netdev.Offload) (n int, k *kicker, full bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if d.broken.Load() || !q.ready() {
		return 0, nil, false, nil
	}
	var frames, bytes, dropped uint64
	for ; n < len(bufs); n++ {
		o := netdev.Offload{}
		if offs != nil {
			o = offs[n]
		}
		if !d.encodeHeader(&o) {
			dropped++
			continue
		}
		placed, room, perr := d.place(q, bufs[n])
		if perr != nil {
			err = perr
			break
		}
		if !room {
			if q.arm() {
				n-- // posted meanwhile: try again
				continue
			}
			k, full = q.kick, true
			break
		}
		if !placed {
			dropped++
			continue
		}
		frames++
		bytes += uint64(len(bufs[n]))
	}
	if q.publish() && q.call >= 0 {
		signal(q.call)
		d.stats.Calls.Add(1)
	}
	d.stats.TxFrames.Add(frames)
	if q.frames != nil {
		q.frames.Add(frames)
	}
	d.stats.TxBytes.Add(bytes)
	if dropped > 0 {
		d.stats.TxDropped.Add(dropped)
	}
	return n, k, full, err
}

// encodeHeader writes o as the header for the guest into d.tx.hdr: false when the guest did
// not negotiate the offload o needs.
func (d *Device) encodeHeader(o *netdev.Offload) bool {
	f := d.features
	if f&featGuestCsum == 0 {
		o.Flags &^= netdev.OffloadDataValid
	}
	if !negotiated(o, f, featGuestCsum, featGuestTSO4, featGuestTSO6, featGuestECN) {
		return false
	}
	putHeader(d.tx.hdr[:], o)
	return true
}

// place writes the header and frame into the guest's next receive buffers: one chain, or with
// MRG_RXBUF as many as it takes (num_buffers in the header says how many). room is false when
// the guest has posted too few (nothing is taken then); placed is false for a frame larger
// than a chain without MRG_RXBUF, or with it than the whole ring (dropped, the buffers stay
// the guest's).
func (d *Device) place(q *queue, frame []byte) (placed, room bool, err error) {
	mrg := d.features&featMrgRxbuf != 0
	var hdr []byte // where the header goes: the front of the first buffer
	rest := frame
	heads := 0
	for hdr == nil || len(rest) > 0 {
		if heads > 0 && !mrg {
			q.unpop(heads)
			return false, true, nil
		}
		head, ok, err := q.pop()
		if err != nil {
			return false, false, err
		}
		if !ok {
			q.unpop(heads)
			// Every buffer the ring holds and still too little: no kick can bring more.
			return false, heads == int(q.num), nil
		}
		c := q.chain(q.mem, head)
		var used uint32
		for hdr == nil || len(rest) > 0 {
			b, write, err := c.buffer()
			if err != nil {
				return false, false, err
			}
			if b == nil {
				break
			}
			if !write {
				return false, false, q.faultf("descriptor chain at %d has a device-readable buffer in the receive queue", head)
			}
			if hdr == nil {
				if len(b) < d.hdrLen {
					return false, false, q.faultf("receive buffer at %d has %d bytes, less than the %d-byte header", head, len(b), d.hdrLen)
				}
				hdr, b = b[:d.hdrLen], b[d.hdrLen:]
				used += uint32(d.hdrLen)
			}
			k := copy(b, rest)
			rest = rest[k:]
			used += uint32(k)
		}
		q.pending[heads] = usedElem{head, used}
		heads++
	}
	h := d.tx.hdr[:d.hdrLen]
	if d.hdrLen == maxHdrLen {
		le.PutUint16(h[10:], uint16(heads))
	}
	copy(hdr, h)
	for _, e := range q.pending[:heads] {
		q.push(e.head, e.n)
	}
	return true, true, nil
}
