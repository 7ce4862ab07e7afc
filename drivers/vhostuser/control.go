package vhostuser

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"

	"golang.org/x/sys/unix"
)

// Serve runs the protocol until the front end disconnects (nil) or sends a message the back end
// refuses (that error, after marking the device broken). Either way the connection is closed,
// the guest's memory unmapped and Read and Write return ErrClosed once Serve has returned.
func (d *Device) Serve() (err error) {
	defer d.shutdown()
	if c := d.ctrlQueue(); c != nil {
		go d.serveCtrl(c)
	}
	var hdr [msgHdrLen]byte
	payload := make([]byte, maxPayload)
	oob := make([]byte, unix.CmsgSpace(4*maxFDs))
	var fds []int
	for {
		fds = fds[:0]
		if fds, err = d.recv(hdr[:], oob, fds); err != nil {
			closeAll(fds)
			if errors.Is(err, io.EOF) {
				return nil
			}
			return d.refuse(err)
		}
		h, err := parseHeader(hdr[:])
		if err == nil {
			fds, err = d.recv(payload[:h.size], oob, fds)
		}
		var m message
		if err == nil {
			m, err = parseMessage(h, payload[:h.size], len(fds))
		}
		if err == nil {
			d.log.Debug("vhost-user message", "request", reqName(h.request), "flags", h.flags, "size", h.size, "fds", len(fds))
			err = d.handle(&m, fds)
		} else {
			closeAll(fds)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return d.refuse(err)
		}
	}
}

// refuse breaks the device for a message fault, which ends the connection.
func (d *Device) refuse(err error) error {
	if d.closed.Load() {
		return nil // Close ended the connection
	}
	d.breakDown(err, nil)
	return err
}

// recv fills b from the connection, adding the descriptors that come with it to fds. More
// descriptors than a message may carry is a fault.
func (d *Device) recv(b, oob []byte, fds []int) ([]int, error) {
	for len(b) > 0 {
		n, oobn, flags, _, err := d.conn.ReadMsgUnix(b, oob)
		if oobn > 0 {
			cms, perr := unix.ParseSocketControlMessage(oob[:oobn])
			for _, cm := range cms {
				if got, err := unix.ParseUnixRights(&cm); err == nil {
					fds = append(fds, got...)
				}
			}
			if perr != nil && err == nil {
				err = fmt.Errorf("control message: %w", perr)
			}
		}
		if flags&unix.MSG_CTRUNC != 0 && err == nil {
			err = fmt.Errorf("more than %d descriptors with one message", maxFDs)
		}
		if err != nil {
			return fds, err
		}
		if n == 0 {
			return fds, io.EOF
		}
		b = b[n:]
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// lockAll takes every queue's lock: the data path is between batches.
func (d *Device) lockAll() func() {
	for i := range d.q {
		d.q[i].mu.Lock()
	}
	return func() {
		for i := range d.q {
			d.q[i].wake()
			d.q[i].mu.Unlock()
		}
	}
}

// handle carries out message m, which came with fds (now its: they are closed or kept),
// and answers it.
func (d *Device) handle(m *message, fds []int) error {
	var reply []byte
	var err error
	replyFD := -1
	switch m.request {
	case reqGetFeatures:
		reply = le.AppendUint64(nil, d.offered())
	case reqSetFeatures:
		err = d.setFeatures(m.u64)
	case reqGetProtocolFeatures:
		reply = le.AppendUint64(nil, d.protocols)
	case reqSetProtocolFeatures:
		if m.u64&^d.protocols != 0 {
			err = fmt.Errorf("SET_PROTOCOL_FEATURES: %#x were not offered (%#x)", m.u64&^d.protocols, d.protocols)
		} else {
			d.mu.Lock()
			d.protocol, d.protocolSet = m.u64, true
			d.mu.Unlock()
		}
	case reqGetQueueNum:
		reply = le.AppendUint64(nil, uint64(d.pairs))
	case reqSetOwner:
	case reqResetOwner:
		unlock := d.lockAll()
		for i := range d.q {
			d.q[i].stop()
		}
		d.broken.Store(false)
		unlock()
	case reqSetMemTable:
		err = d.setMemTable(m, fds) // the table takes fds
	case reqSetVringNum, reqSetVringAddr, reqSetVringBase, reqGetVringBase, reqSetVringEnable:
		reply, err = d.vring(m)
	case reqSetVringKick, reqSetVringCall, reqSetVringErr:
		err = d.vringFD(m, fds)
	case reqGetInflightFD:
		reply, replyFD, err = d.getInflight(m)
	case reqSetInflightFD:
		err = d.setInflightFD(m, fds) // the region takes fds
	case reqSetLogBase, reqSetLogFD:
		closeAll(fds)
		err = fmt.Errorf("%s: dirty logging (migration) was not offered", reqName(m.request))
	default:
		closeAll(fds)
		err = fmt.Errorf("%s is unknown or was not negotiated", reqName(m.request))
	}
	if err != nil {
		return err
	}
	d.keep(m.request) // before the answer: what the front end saw done is kept
	d.mu.Lock()
	ack := m.needsReply(d.protocol&protoReplyAck != 0)
	d.mu.Unlock()
	if ack {
		reply = le.AppendUint64(nil, 0)
	}
	if reply == nil {
		return nil
	}
	out := make([]byte, msgHdrLen, msgHdrLen+len(reply))
	le.PutUint32(out, m.request)
	le.PutUint32(out[4:], flagVersion|flagReply)
	le.PutUint32(out[8:], uint32(len(reply)))
	if replyFD >= 0 {
		defer unix.Close(replyFD)
		_, _, err = d.conn.WriteMsgUnix(append(out, reply...), unix.UnixRights(replyFD), nil)
		return err
	}
	_, err = d.conn.Write(append(out, reply...))
	return err
}

// protocolFeatures reports whether the front end uses protocol features: it acked
// VHOST_USER_F_PROTOCOL_FEATURES, or set protocol features, which it does only once it saw the
// bit offered (QEMU disables the rings with SET_VRING_ENABLE before its SET_FEATURES).
// Rings then start disabled.
func (d *Device) protocolFeatures() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.protocolSet || d.features&featProtocol != 0
}

func (d *Device) setFeatures(f uint64) error {
	if f&^d.offered() != 0 {
		return fmt.Errorf("SET_FEATURES: %#x were not offered (%#x)", f&^d.offered(), d.offered())
	}
	unlock := d.lockAll()
	defer unlock()
	d.mu.Lock()
	d.features = f // read by the data path under its queue's lock, by the control path under mu
	d.mu.Unlock()
	d.hdrLen = 10
	if f&(featVersion1|featMrgRxbuf) != 0 {
		d.hdrLen = maxHdrLen
	}
	for i := range d.q {
		d.q[i].eventIdx = f&featEventIdx != 0
		d.q[i].setPacked(f&featRingPacked != 0)
	}
	d.log.Info("features negotiated", "features", fmt.Sprintf("%#x", f), "packed", f&featRingPacked != 0, "in_order", f&featInOrder != 0,
		"event_idx", f&featEventIdx != 0, "mrg_rxbuf", f&featMrgRxbuf != 0, "ctrl_vq", f&featCtrlVQ != 0)
	// With the control queue the driver's: one pair until it sets more (virtio-net 5.1.6.5.5);
	// else the front end enables the pairs' rings.
	if f&featCtrlVQ != 0 {
		d.active.Store(1)
	} else {
		d.active.Store(int32(d.pairs))
	}
	return nil
}

// setMemTable maps the new table, points the queues at it and unmaps the old one.
func (d *Device) setMemTable(m *message, fds []int) error {
	t, err := mapMemTable(m, fds)
	if err != nil {
		return err
	}
	unlock := d.lockAll()
	old := d.mem
	d.mem = t
	for i := range d.q {
		q := &d.q[i]
		q.mem = t
		if q.hasAddr {
			if err = q.translate(); err != nil {
				q.hasAddr = false
				break
			}
		}
	}
	unlock()
	old.unmap()
	return err
}

// translate points the ring at its areas in the current memory table (q.mu held).
func (q *queue) translate() error {
	if q.mem == nil {
		return q.faultf("ring addresses before a memory table")
	}
	avail, used := availLen(q.num), usedLen(q.num)
	if q.packed {
		avail, used = eventAreaLen, eventAreaLen // the driver's and the device's event structures
	}
	return q.setAreas(q.mem.front(q.addr.desc, descLen*uint64(q.num)),
		q.mem.front(q.addr.avail, avail), q.mem.front(q.addr.used, used))
}

// queue returns the ring m is about; nil (no error) for a ring past the device's that is
// ignored (ignoreRing).
func (d *Device) queue(m *message) (*queue, error) {
	if d.ignoreRing(m.index) {
		return nil, nil
	}
	if m.index >= uint32(len(d.q)) {
		return nil, fmt.Errorf("%s: queue %d, the device has %d", reqName(m.request), m.index, len(d.q))
	}
	return &d.q[m.index], nil
}

// vring handles the messages about one ring's state.
func (d *Device) vring(m *message) ([]byte, error) {
	q, err := d.queue(m)
	if err != nil {
		return nil, err
	}
	if q == nil {
		if m.request == reqGetVringBase {
			return le.AppendUint32(le.AppendUint32(nil, m.index), 0), nil
		}
		return nil, nil
	}
	protocol := d.protocolFeatures()
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.wake()
	switch m.request {
	case reqSetVringNum:
		if m.num == 0 || m.num > maxQueueSize || bits.OnesCount32(m.num) != 1 {
			return nil, q.faultf("SET_VRING_NUM: size %d is not a power of 2 up to %d", m.num, maxQueueSize)
		}
		if q.started {
			return nil, q.faultf("SET_VRING_NUM while the ring runs")
		}
		q.num, q.hasAddr = uint16(m.num), false
		q.pending = make([]usedElem, q.num)
		q.setPacked(q.packed) // its tables by the new size
	case reqSetVringAddr:
		if q.num == 0 {
			return nil, q.faultf("SET_VRING_ADDR before SET_VRING_NUM")
		}
		q.addr = m.addr
		if err := q.translate(); err != nil {
			q.hasAddr = false
			return nil, err
		}
		q.hasAddr = true
		q.usedFlags = 0
		if q.packed {
			if q.lastAvail >= q.num {
				q.hasAddr = false
				return nil, q.faultf("SET_VRING_BASE: slot %d of a packed ring of %d", q.lastAvail, q.num)
			}
			break
		}
		q.usedIdx = le.Uint16(q.used[2:])
		q.pubUsed = q.usedIdx
		if q.inf != nil { // a ring started before its addresses: the region follows
			le.PutUint16(q.inf[14:], q.pubUsed)
		}
	case reqSetVringBase:
		if m.num > 0xffff {
			return nil, q.faultf("SET_VRING_BASE: %d is no ring index", m.num)
		}
		q.lastAvail, q.availIdx = uint16(m.num), uint16(m.num)
		if q.packed {
			if q.num > 0 && uint16(m.num&0x7fff) >= q.num {
				return nil, q.faultf("SET_VRING_BASE: slot %d of a packed ring of %d", m.num&0x7fff, q.num)
			}
			q.setPackedBase(m.num)
		}
	case reqGetVringBase:
		q.stop()
		stopped := true
		for i := range d.q {
			if o := &d.q[i]; o != q {
				o.mu.Lock()
				stopped = stopped && !o.started
				o.mu.Unlock()
			}
		}
		if stopped {
			d.broken.Store(false) // the driver reset the device
		}
		base := uint32(q.lastAvail)
		if q.packed {
			base = q.packedBase()
		}
		return le.AppendUint32(le.AppendUint32(nil, m.index), base), nil
	case reqSetVringEnable:
		if !protocol {
			return nil, q.faultf("SET_VRING_ENABLE without protocol features")
		}
		if m.num > 1 {
			return nil, q.faultf("SET_VRING_ENABLE: %d is neither 0 nor 1", m.num)
		}
		q.enabled = m.num == 1
	}
	return nil, nil
}

// vringFD handles SET_VRING_KICK, _CALL and _ERR: each takes an eventfd (or none).
func (d *Device) vringFD(m *message, fds []int) error {
	q, err := d.queue(m)
	if err == nil && len(fds) == 1 {
		err = checkEventfd(fds[0], m)
	}
	if err != nil || q == nil {
		closeAll(fds)
		return err
	}
	fd := -1
	if len(fds) == 1 {
		fd = fds[0]
	}
	protocol := d.protocolFeatures()
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.wake()
	switch m.request {
	case reqSetVringKick:
		if fd < 0 {
			return q.faultf("SET_VRING_KICK without a descriptor: polling mode was not offered")
		}
		k, err := newKicker(fd)
		if err != nil {
			return err
		}
		q.stop()
		if err := d.attachInflight(int(m.index), q); err != nil {
			k.f.Close()
			return err
		}
		q.kick, q.started = k, true
		if !protocol {
			q.enabled = true // without protocol features a ring starts enabled
		}
	case reqSetVringCall:
		if q.call >= 0 {
			unix.Close(q.call)
		}
		q.call = fd
	case reqSetVringErr:
		if q.errFD >= 0 {
			unix.Close(q.errFD)
		}
		q.errFD = fd
	}
	return nil
}

// checkEventfd refuses a descriptor that is not an eventfd: the data path reads and writes
// it as one, and a file that is always readable would spin it.
func checkEventfd(fd int, m *message) error {
	link, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if link != "anon_inode:[eventfd]" {
		return fmt.Errorf("%s: queue %d: the descriptor is %q, not an eventfd", reqName(m.request), m.index, link)
	}
	return nil
}

// shutdown ends the connection and lets go of everything the front end handed over.
func (d *Device) shutdown() {
	d.closed.Store(true)
	d.conn.Close()
	unlock := d.lockAll()
	for i := range d.q {
		q := &d.q[i]
		q.closeFDs()
		q.mem, q.hasAddr = nil, false
	}
	mem, inflight := d.mem, d.inflight
	d.mem, d.inflight = nil, nil
	unlock()
	mem.unmap()
	inflight.unmap()
	close(d.done)
}
