package vhostuser

// A takeover: a next process of the back end resumes the connection a dead one served, and
// the front end notices nothing (docs/vms.md, "A back end that crashes").
//
// Before it answers a message that changed the device, and once the control queue has changed
// the pairs in use, the device hands its keeper the connection's state: a record of what was
// negotiated (features, the memory table's addresses, each ring's size, addresses, base and
// whether it runs, the inflight region's size), and duplicates of the connection, the memory
// table's descriptors, each ring's call, error and kick eventfds and the inflight region's, in
// the record's order. Resume rebuilds a device from them by replaying the
// messages that built the old one, so that everything is checked as at first connection.
//
// Ring positions are not in the record: they are in guest memory and, with
// INFLIGHT_SHMFD, in the inflight region (inflight.go), whose descriptor comes last. Both
// directions complete chains in order and publish every chain a batch takes before the batch
// ends, so a running ring resumes at the used index the driver was shown (a split ring's used
// idx; a packed ring's used slot and wrap counter, which only the region holds): the chains the
// dead process took and did not publish are taken again.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// maxRecord bounds the record Resume reads: a few hundred bytes per ring.
const maxRecord = 16 << 10

// record is what the front end negotiated, as a takeover carries it (JSON). Each descriptor it
// implies comes in this order: the connection, one per memory region, then per ring its call
// (Call), error (Err) and kick (Started) eventfds, then the inflight region's.
type record struct {
	Features    uint64
	Protocol    uint64
	ProtocolSet bool
	Broken      bool
	Pairs       int // the queue pairs the device offered (SetQueuePairs); 0: one
	Active      int // of those, the pairs in use (VQ_PAIRS_SET); 0: all
	Mem         []memRecord
	Rings       []ringRecord
	Inflight    *inflightRecord // nil: none
}

// inflightRecord is SET_INFLIGHT_FD's payload for the region.
type inflightRecord struct {
	Size, Offset      uint64
	Queues, QueueSize uint16
}

type memRecord struct{ GPA, Size, UAddr, Offset uint64 }

type ringRecord struct {
	Num                         uint32
	Addr                        *addrRecord // nil: none set yet
	Base                        uint32      // the next avail entry, for a ring that does not run
	Enabled, Started, Call, Err bool
}

type addrRecord struct {
	Flags                  uint32
	Desc, Used, Avail, Log uint64
}

// SetKeeper has the device hand keep the connection's state, a record and descriptors, after
// every message that changes it (see above), and at once; set it before Serve runs. keep
// owns the descriptors: it closes them.
func (d *Device) SetKeeper(keep func(record []byte, fds []int)) {
	d.mu.Lock()
	d.keeper = keep
	d.mu.Unlock()
	d.keep(0)
}

// keep hands the keeper the state as it is now that request was carried out; a request
// that changes nothing keeps nothing.
func (d *Device) keep(request uint32) {
	switch request {
	case reqGetFeatures, reqGetProtocolFeatures, reqGetQueueNum, reqSetOwner:
		return
	}
	d.mu.Lock()
	keeper := d.keeper
	d.mu.Unlock()
	if keeper == nil {
		return
	}
	d.keepMu.Lock() // the control queue's goroutine keeps too (VQ_PAIRS_SET)
	defer d.keepMu.Unlock()
	rec, fds, err := d.export()
	if err != nil {
		d.log.Warn("the connection's state was not kept: a restart of the back end would lose it", "err", err)
		return
	}
	keeper(rec, fds)
}

// export is the record of the connection's state and duplicates of its descriptors.
func (d *Device) export() (rec []byte, fds []int, err error) {
	defer func() {
		if err != nil {
			closeAll(fds)
			fds = nil
		}
	}()
	dup := func(fd uintptr) {
		n, derr := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
		if derr != nil {
			err = fmt.Errorf("duplicating descriptor %d: %w", fd, derr)
			return
		}
		fds = append(fds, n)
	}
	rc, cerr := d.conn.SyscallConn()
	if cerr == nil {
		cerr = rc.Control(dup)
	}
	if cerr != nil {
		return nil, fds, cerr
	}
	for i := range d.q {
		d.q[i].mu.Lock()
		defer d.q[i].mu.Unlock()
	}
	d.mu.Lock()
	r := record{Features: d.features, Protocol: d.protocol, ProtocolSet: d.protocolSet, Broken: d.broken.Load(),
		Pairs: d.pairs, Active: int(d.active.Load())}
	if d.mem != nil {
		for _, m := range d.mem.regions {
			r.Mem = append(r.Mem, memRecord{GPA: m.gpa, Size: m.size, UAddr: m.uaddr, Offset: m.offset})
			dup(uintptr(m.fd))
		}
	}
	d.mu.Unlock()
	for i := range d.q {
		q := &d.q[i]
		ring := ringRecord{Num: uint32(q.num), Base: uint32(q.lastAvail), Enabled: q.enabled}
		if q.hasAddr {
			ring.Addr = &addrRecord{Flags: q.addr.flags, Desc: q.addr.desc, Used: q.addr.used, Avail: q.addr.avail, Log: q.addr.log}
		}
		if q.call >= 0 {
			ring.Call = true
			dup(uintptr(q.call))
		}
		if q.errFD >= 0 {
			ring.Err = true
			dup(uintptr(q.errFD))
		}
		if q.started && q.kick != nil {
			ring.Started = true
			if kerr := q.kick.rc.Control(dup); kerr != nil && err == nil {
				err = kerr
			}
		}
		r.Rings = append(r.Rings, ring)
	}
	if in := d.inflight; in != nil { // every queue's lock is held
		r.Inflight = &inflightRecord{Size: in.desc.mmapSize, Offset: in.desc.mmapOffset, Queues: in.desc.queues, QueueSize: in.desc.queueSize}
		dup(uintptr(in.fd))
	}
	if err != nil {
		return nil, fds, err
	}
	rec, err = json.Marshal(&r)
	return rec, fds, err
}

// Resume rebuilds the device of a connection that a dead process of the back end served,
// from the record and descriptors its keeper was handed (files, which Resume closes: it keeps
// duplicates). The record and the descriptors are the front end's as much as its messages
// are, and checked as they were: each is replayed as the message that set it. A running ring
// resumes at the used index in guest memory, and its guest is called once for a call the dead
// process may have owed. The caller runs Serve and the data path, as for Accept's device.
func Resume(record []byte, files []*os.File, log *slog.Logger, stats *Stats) (*Device, error) {
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	rec, err := readRecord(record)
	if err != nil {
		return nil, fmt.Errorf("vhost-user takeover: %w", err)
	}
	want := 1 + len(rec.Mem)
	if rec.Inflight != nil {
		want++
	}
	for _, r := range rec.Rings {
		for _, has := range []bool{r.Started, r.Call, r.Err} {
			if has {
				want++
			}
		}
	}
	if len(files) != want {
		return nil, fmt.Errorf("vhost-user takeover: %d descriptors, the record names %d", len(files), want)
	}
	conn, err := resumeConn(files[0])
	if err != nil {
		return nil, fmt.Errorf("vhost-user takeover: %w", err)
	}
	d := New(conn, log, stats)
	if err := d.resumePairs(rec); err != nil {
		d.shutdown()
		return nil, fmt.Errorf("vhost-user takeover: %w", err)
	}
	if err := d.replay(rec, files[1:]); err != nil {
		d.shutdown()
		return nil, fmt.Errorf("vhost-user takeover: %w", err)
	}
	d.broken.Store(rec.Broken)
	if rec.Active > 0 {
		d.active.Store(int32(rec.Active))
	}
	for i := range d.q {
		q := &d.q[i]
		q.mu.Lock()
		if q.started && q.call >= 0 {
			signal(q.call)
		}
		q.mu.Unlock()
	}
	return d, nil
}

// resumePairs gives the device the queue pairs of the record, before the rings are replayed,
// and refuses what a takeover cannot resume: a packed ring's position lives in the
// descriptors' flags and the device's wrap counters, not in an index the driver was shown;
// only the inflight region has it.
func (d *Device) resumePairs(rec *record) error {
	if rec.Features&featRingPacked != 0 && rec.Inflight == nil {
		for _, r := range rec.Rings {
			if r.Started {
				return fmt.Errorf("a running packed ring cannot be resumed without the inflight region (INFLIGHT_SHMFD)")
			}
		}
	}
	if rec.Pairs > 1 {
		if err := d.SetQueuePairs(rec.Pairs); err != nil {
			return err
		}
	}
	if rec.Active < 0 || rec.Active > max(rec.Pairs, 1) {
		return fmt.Errorf("%d queue pairs in use of %d", rec.Active, max(rec.Pairs, 1))
	}
	return nil
}

// resumeBase is where running ring i resumes: the used position the driver was last shown,
// from the inflight region when there is one (checked against the ring), else the used idx.
func (d *Device) resumeBase(i int) (uint32, error) {
	q := &d.q[i]
	q.mu.Lock()
	defer q.mu.Unlock()
	r := d.inflight
	if r == nil {
		if q.packed {
			return 0, q.faultf("a running packed ring cannot be resumed without the inflight region (INFLIGHT_SHMFD)")
		}
		return uint32(q.usedIdx), nil
	}
	if i >= int(r.desc.queues) {
		return 0, q.faultf("inflight region: num_queues %d, the ring is queue %d", r.desc.queues, i)
	}
	if r.desc.queueSize != q.num {
		return 0, q.faultf("inflight region: queue_size %d, the ring has %d", r.desc.queueSize, q.num)
	}
	return q.resumeInflight(r.part(i), r.packed)
}

func readRecord(b []byte) (*record, error) {
	if len(b) > maxRecord {
		return nil, fmt.Errorf("record of %d bytes, at most %d", len(b), maxRecord)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	rec := &record{}
	if err := dec.Decode(rec); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	return rec, nil
}

// resumeConn is the connection of the takeover: a connected Unix stream socket.
func resumeConn(f *os.File) (*net.UnixConn, error) {
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("connection: %w", err)
	}
	u, ok := c.(*net.UnixConn)
	if !ok || u.LocalAddr().Network() != "unix" {
		c.Close()
		return nil, fmt.Errorf("connection: %s is not a Unix stream socket", c.LocalAddr().Network())
	}
	return u, nil
}

// replay carries out the messages that make the state rec records, with the descriptors
// files in the record's order.
func (d *Device) replay(rec *record, files []*os.File) error {
	next := func() (int, error) {
		f := files[0]
		files = files[1:]
		return dupFile(f)
	}
	send := func(req uint32, p []byte, fds ...int) error {
		m, err := parseMessage(header{request: req, flags: flagVersion, size: uint32(len(p))}, p, len(fds))
		if err != nil {
			closeAll(fds)
			return err
		}
		return d.handle(&m, fds)
	}
	if err := send(reqSetFeatures, le.AppendUint64(nil, rec.Features)); err != nil {
		return err
	}
	if rec.ProtocolSet {
		if err := send(reqSetProtocolFeatures, le.AppendUint64(nil, rec.Protocol)); err != nil {
			return err
		}
	}
	if len(rec.Mem) > 0 {
		if len(rec.Mem) > maxRegions {
			return fmt.Errorf("SET_MEM_TABLE: %d regions, want 1 to %d", len(rec.Mem), maxRegions)
		}
		p := le.AppendUint64(nil, uint64(len(rec.Mem)))
		fds := make([]int, 0, len(rec.Mem))
		for _, r := range rec.Mem {
			p = le.AppendUint64(le.AppendUint64(le.AppendUint64(le.AppendUint64(p, r.GPA), r.Size), r.UAddr), r.Offset)
			fd, err := next()
			if err != nil {
				closeAll(fds)
				return err
			}
			fds = append(fds, fd)
		}
		if err := send(reqSetMemTable, p, fds...); err != nil {
			return err
		}
	}
	if in := rec.Inflight; in != nil {
		inflight := files[len(files)-1]
		files = files[:len(files)-1]
		fd, err := dupFile(inflight)
		if err != nil {
			return err
		}
		p := appendInflightDesc(nil, inflightDesc{mmapSize: in.Size, mmapOffset: in.Offset, queues: in.Queues, queueSize: in.QueueSize})
		if err := send(reqSetInflightFD, p, fd); err != nil {
			return err
		}
	}
	if len(rec.Rings) > len(d.q) {
		return fmt.Errorf("%d rings, the device has %d", len(rec.Rings), len(d.q))
	}
	for i, r := range rec.Rings {
		if err := d.replayRing(uint32(i), r, next, send); err != nil {
			return err
		}
	}
	return nil
}

// dupFile duplicates f's descriptor, for a message to take.
func dupFile(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if cerr := rc.Control(func(old uintptr) { fd, err = unix.FcntlInt(old, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		return -1, cerr
	}
	return fd, err
}

func (d *Device) replayRing(i uint32, r ringRecord, next func() (int, error), send func(uint32, []byte, ...int) error) error {
	state := func(n uint32) []byte { return le.AppendUint32(le.AppendUint32(nil, i), n) }
	if r.Num > 0 {
		if err := send(reqSetVringNum, state(r.Num)); err != nil {
			return err
		}
	}
	base := r.Base
	if a := r.Addr; a != nil {
		p := le.AppendUint32(le.AppendUint32(nil, i), a.Flags)
		for _, v := range []uint64{a.Desc, a.Used, a.Avail, a.Log} {
			p = le.AppendUint64(p, v)
		}
		if err := send(reqSetVringAddr, p); err != nil {
			return err
		}
		if r.Started {
			var err error
			if base, err = d.resumeBase(int(i)); err != nil {
				return err
			}
		}
	}
	if err := send(reqSetVringBase, state(base)); err != nil {
		return err
	}
	for _, f := range []struct {
		has bool
		req uint32
	}{{r.Call, reqSetVringCall}, {r.Err, reqSetVringErr}} {
		if !f.has {
			continue
		}
		fd, err := next()
		if err != nil {
			return err
		}
		if err := send(f.req, le.AppendUint64(nil, uint64(i)), fd); err != nil {
			return err
		}
	}
	if d.protocolFeatures() {
		enable := uint32(0)
		if r.Enabled {
			enable = 1
		}
		if err := send(reqSetVringEnable, state(enable)); err != nil {
			return err
		}
	}
	if r.Started {
		fd, err := next()
		if err != nil {
			return err
		}
		return send(reqSetVringKick, le.AppendUint64(nil, uint64(i)), fd)
	}
	return nil
}
