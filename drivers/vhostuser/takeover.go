package vhostuser

// A takeover: a next process of the back end resumes the connection a dead one served, and
// the front end notices nothing (docs/vms.md, "A back end that crashes").
//
// After every message it carries out, the device hands its keeper the connection's state as
// descriptors: a sealed memfd holding the record of what was negotiated (features, the memory
// table's addresses, each ring's size, addresses, base and whether it runs), then duplicates
// of the connection, the memory table's descriptors and each ring's call, error and kick
// eventfds, in the record's order. Resume rebuilds a device from them by replaying the
// messages that built the old one, so that everything is checked as at first connection.
//
// Ring positions are not in the record: they are in guest memory. Both directions complete
// chains in order and publish every chain a batch takes before the batch ends, so a running
// ring resumes at the used index the driver was shown: the chains the dead process took and
// did not publish are taken again (their frames are lost; TCP resends them).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// maxRecord bounds the record Resume reads: a few hundred bytes per ring.
const maxRecord = 64 << 10

// record is what the front end negotiated, as a takeover carries it. Each descriptor it
// implies follows the record in this order: the connection, one per memory region, then per
// ring its call (Call), error (Err) and kick (Started) eventfds.
type record struct {
	Features    uint64
	Protocol    uint64
	ProtocolSet bool
	Broken      bool
	Mem         []memRecord
	Rings       []ringRecord
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

// SetKeeper has the device hand keep the connection's state after every message it carries
// out (see above), and at once; set it before Serve runs. keep owns the descriptors: it
// closes them.
func (d *Device) SetKeeper(keep func(fds []int)) {
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
	fds, err := d.export()
	if err != nil {
		d.log.Warn("the connection's state was not kept: a restart of the back end would lose it", "err", err)
		return
	}
	keeper(fds)
}

// export duplicates the connection's descriptors behind a record of its state.
func (d *Device) export() (fds []int, err error) {
	fds = []int{-1} // the record's place
	defer func() {
		if err != nil {
			closeAll(fds[1:])
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
		return fds, cerr
	}
	for i := range d.q {
		d.q[i].mu.Lock()
		defer d.q[i].mu.Unlock()
	}
	d.mu.Lock()
	rec := record{Features: d.features, Protocol: d.protocol, ProtocolSet: d.protocolSet, Broken: d.broken.Load()}
	if d.mem != nil {
		for _, r := range d.mem.regions {
			rec.Mem = append(rec.Mem, memRecord{GPA: r.gpa, Size: r.size, UAddr: r.uaddr, Offset: r.offset})
			dup(uintptr(r.fd))
		}
	}
	d.mu.Unlock()
	for i := range d.q {
		q := &d.q[i]
		r := ringRecord{Num: uint32(q.num), Base: uint32(q.lastAvail), Enabled: q.enabled}
		if q.hasAddr {
			r.Addr = &addrRecord{Flags: q.addr.flags, Desc: q.addr.desc, Used: q.addr.used, Avail: q.addr.avail, Log: q.addr.log}
		}
		if q.call >= 0 {
			r.Call = true
			dup(uintptr(q.call))
		}
		if q.errFD >= 0 {
			r.Err = true
			dup(uintptr(q.errFD))
		}
		if q.started && q.kick != nil {
			r.Started = true
			if kerr := q.kick.rc.Control(dup); kerr != nil && err == nil {
				err = kerr
			}
		}
		rec.Rings = append(rec.Rings, r)
	}
	if err != nil {
		return fds, err
	}
	b, err := json.Marshal(&rec)
	if err != nil {
		return fds, err
	}
	fds[0], err = recordFile(b)
	return fds, err
}

// recordFile is a sealed memfd holding b.
func recordFile(b []byte) (int, error) {
	fd, err := unix.MemfdCreate("vhost-user-takeover", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	n, err := unix.Pwrite(fd, b, 0)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("writing the record: %w", err)
	}
	return fd, nil
}

// Resume rebuilds the device of a connection that a dead process of the back end served,
// from the descriptors its keeper was handed (files, which Resume closes: it keeps
// duplicates). The record and the descriptors are the front end's as much as its messages
// are, and checked as they were: each is replayed as the message that set it. A running ring
// resumes at the used index in guest memory, and its guest is called once for a call the dead
// process may have owed. The caller runs Serve and the data path, as for Accept's device.
func Resume(files []*os.File, log *slog.Logger, stats *Stats) (*Device, error) {
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if len(files) < 2 {
		return nil, fmt.Errorf("vhost-user takeover: %d descriptors, want a record and a connection at least", len(files))
	}
	rec, err := readRecord(files[0])
	if err != nil {
		return nil, fmt.Errorf("vhost-user takeover: %w", err)
	}
	want := 2 + len(rec.Mem)
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
	conn, err := resumeConn(files[1])
	if err != nil {
		return nil, fmt.Errorf("vhost-user takeover: %w", err)
	}
	d := New(conn, log, stats)
	if err := d.replay(rec, files[2:]); err != nil {
		d.shutdown()
		return nil, fmt.Errorf("vhost-user takeover: %w", err)
	}
	d.broken.Store(rec.Broken)
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

func readRecord(f *os.File) (*record, error) {
	var st unix.Stat_t
	rc, err := f.SyscallConn()
	if err == nil {
		rc.Control(func(fd uintptr) { err = unix.Fstat(int(fd), &st) })
	}
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > maxRecord {
		return nil, fmt.Errorf("record: not a file of at most %d bytes (mode %#o, %d bytes)", maxRecord, st.Mode, st.Size)
	}
	b := make([]byte, st.Size)
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("record: %w", err)
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
			q := &d.q[i]
			q.mu.Lock()
			base = uint32(q.usedIdx) // where the driver was last shown the device
			q.mu.Unlock()
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
