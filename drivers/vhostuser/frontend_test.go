package vhostuser

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/internal/testutil"
)

// frontend is a test's QEMU and guest driver in one: it shares a memfd as guest memory,
// speaks vhost-user to a Device over a socket pair and drives the split rings, correctly or
// not, as the test asks.
type frontend struct {
	t        testing.TB
	fd       int    // our end of the socket
	mem      []byte // the guest's memory, as the front end maps it
	memfd    int
	q        []fq // pairs' rings, then the control queue
	dev      *Device
	log      *testutil.SyncBuffer
	stats    *Stats
	counters sync.Map   // the device's counters by name (stats')
	done     chan error // Serve's result
	features uint64     // negotiated
	hdrLen   int
	kicks    int // kicks sent
	closing  sync.Once
	// The inflight region GET_INFLIGHT_FD gave (as the front end keeps it for a reconnect),
	// unless noInflight.
	noInflight  bool
	inflightFD  int
	inflight    []byte
	inflightLen uint64
}

// fq is the driver's side of one queue.
type fq struct {
	num                 uint16
	desc, avail, used   uint64 // guest addresses
	availIdx, usedSeen  uint16
	availWrap, usedWrap bool // a packed ring's wrap counters
	kick, call, err     int
	bufs                uint64 // guest address of this queue's buffers, bufSize each per descriptor
}

const (
	guestMem = 4 << 20
	uaddrOf  = 0x7f0000000000 // the front end's address of guest address 0
	bufSize  = 4096
	ringNum  = 64
)

// newFrontend connects a fresh Device and returns the front end, memory shared, nothing
// negotiated yet.
func newFrontend(t testing.TB) *frontend { t.Helper(); return newFrontendPairs(t, 1) }

// newFrontendPairs is newFrontend with a device of pairs queue pairs (and rings for them and,
// past one pair, the control queue).
func newFrontendPairs(t testing.TB, pairs int) *frontend {
	t.Helper()
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(sp[1]), "vhost-user")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	tv := unix.Timeval{Sec: 10}
	unix.SetsockoptTimeval(sp[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	memfd, err := unix.MemfdCreate("guest", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(memfd, guestMem); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(memfd, 0, guestMem, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	fe := &frontend{t: t, fd: sp[0], mem: mem, memfd: memfd, log: &testutil.SyncBuffer{}, done: make(chan error, 1), inflightFD: -1}
	fe.stats = NewStats(func(name string) *atomic.Uint64 {
		c, _ := fe.counters.LoadOrStore(name, new(atomic.Uint64))
		return c.(*atomic.Uint64)
	})
	fe.dev = New(c.(*net.UnixConn), slog.New(slog.NewTextHandler(fe.log, nil)), fe.stats)
	if err := fe.dev.SetQueuePairs(pairs); err != nil {
		t.Fatal(err)
	}
	go func() { fe.done <- fe.dev.Serve() }()
	fe.q = make([]fq, len(fe.dev.q))
	for i := range fe.q {
		// Rings in the first MiB, 64 KiB each; each ring's buffers in its own 64 buffers
		// from 1 MiB on.
		q := &fe.q[i]
		base := uint64(i) * 0x8000
		q.num, q.desc, q.avail, q.used = ringNum, base, base+16*ringNum, base+0x4000
		q.bufs = 0x100000 + uint64(i)*ringNum*bufSize
		for _, p := range []*int{&q.kick, &q.call, &q.err} {
			if *p, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(fe.close)
	return fe
}

func (fe *frontend) close() { fe.closing.Do(fe.closeOnce) }

func (fe *frontend) closeOnce() {
	unix.Close(fe.fd)
	select {
	case <-fe.dev.Done():
	case <-time.After(10 * time.Second):
		fe.t.Error("the device did not end with its connection")
	}
	unix.Munmap(fe.mem)
	unix.Close(fe.memfd)
	if fe.inflightFD >= 0 {
		unix.Munmap(fe.inflight)
		unix.Close(fe.inflightFD)
	}
	for _, q := range fe.q {
		unix.Close(q.kick)
		unix.Close(q.call)
		unix.Close(q.err)
	}
}

// send sends a request with payload p and descriptors fds.
func (fe *frontend) send(req, flags uint32, p []byte, fds ...int) error {
	b := le.AppendUint32(nil, req)
	b = le.AppendUint32(b, flagVersion|flags)
	b = le.AppendUint32(b, uint32(len(p)))
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	return unix.Sendmsg(fe.fd, append(b, p...), oob, nil, 0)
}

// call sends a request and reads its reply's payload (want: its size).
func (fe *frontend) call(req uint32, p []byte, want int) []byte {
	fe.t.Helper()
	if err := fe.send(req, 0, p); err != nil {
		fe.t.Fatal(err)
	}
	r := make([]byte, msgHdrLen+want)
	if _, err := readFull(fe.fd, r); err != nil {
		fe.t.Fatalf("%s: reading the reply: %v", reqName(req), err)
	}
	if le.Uint32(r) != req || le.Uint32(r[4:]) != flagVersion|flagReply || le.Uint32(r[8:]) != uint32(want) {
		fe.t.Fatalf("%s: reply header % x", reqName(req), r[:msgHdrLen])
	}
	return r[msgHdrLen:]
}

func readFull(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := unix.Read(fd, b[n:])
		if err == unix.EINTR { // the runtime's preemption signal, under load
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			return n, errors.New("EOF")
		}
		n += k
	}
	return n, nil
}

// must sends a request that has no reply, asking for REPLY_ACK when ack, and checks it.
func (fe *frontend) must(req uint32, p []byte, fds ...int) {
	fe.t.Helper()
	if err := fe.send(req, flagNeedReply, p, fds...); err != nil {
		fe.t.Fatal(err)
	}
	r := make([]byte, msgHdrLen+8)
	if _, err := readFull(fe.fd, r); err != nil {
		fe.t.Fatalf("%s: no ack: %v (log: %s)", reqName(req), err, fe.log)
	}
	if le.Uint64(r[msgHdrLen:]) != 0 {
		fe.t.Fatalf("%s: ack %d", reqName(req), le.Uint64(r[msgHdrLen:]))
	}
}

func u64(v uint64) []byte                  { return le.AppendUint64(nil, v) }
func state(i, n uint32) []byte             { return le.AppendUint32(le.AppendUint32(nil, i), n) }
func (fe *frontend) uaddr(g uint64) uint64 { return uaddrOf + g }

// memTable is a SET_MEM_TABLE payload of one region: all of guest memory.
func memTablePayload(gpa, size, uaddr, off uint64) []byte {
	p := le.AppendUint32(nil, 1)
	p = le.AppendUint32(p, 0)
	for _, v := range []uint64{gpa, size, uaddr, off} {
		p = le.AppendUint64(p, v)
	}
	return p
}

func vringAddrPayload(i uint32, desc, used, avail uint64) []byte {
	p := le.AppendUint32(nil, i)
	p = le.AppendUint32(p, 0)
	for _, v := range []uint64{desc, used, avail, 0} {
		p = le.AppendUint64(p, v)
	}
	return p
}

// start negotiates features (the back end's offer masked with want) and starts both queues
// as QEMU does.
func (fe *frontend) start(want uint64) {
	fe.t.Helper()
	offered := le.Uint64(fe.call(reqGetFeatures, nil, 8))
	if offered != fe.dev.offered() {
		fe.t.Fatalf("features offered %#x, want %#x", offered, fe.dev.offered())
	}
	proto := le.Uint64(fe.call(reqGetProtocolFeatures, nil, 8))
	if proto&protoReplyAck == 0 {
		fe.t.Fatal("REPLY_ACK not offered")
	}
	protocols := uint64(protoReplyAck | protoMQ)
	if !fe.noInflight {
		if proto&protoInflight == 0 {
			fe.t.Fatal("INFLIGHT_SHMFD not offered")
		}
		protocols |= protoInflight
	}
	if err := fe.send(reqSetProtocolFeatures, 0, u64(protocols)); err != nil {
		fe.t.Fatal(err)
	}
	if n := le.Uint64(fe.call(reqGetQueueNum, nil, 8)); n != uint64(len(fe.q)/2) {
		fe.t.Fatalf("GET_QUEUE_NUM %d, want %d", n, len(fe.q)/2)
	}
	fe.must(reqSetOwner, nil)
	fe.features = offered & want
	fe.hdrLen = 10
	if fe.features&(featVersion1|featMrgRxbuf) != 0 {
		fe.hdrLen = 12
	}
	fe.must(reqSetFeatures, u64(fe.features))
	fe.must(reqSetMemTable, memTablePayload(0, guestMem, fe.uaddr(0), 0), fe.memfd)
	if !fe.noInflight {
		fe.getInflight()
	}
	for i := range fe.q {
		fe.startQueue(uint32(i))
	}
}

// getInflight asks the back end for its inflight region, as QEMU's vhost-user-blk does before
// it starts the rings, and maps it.
func (fe *frontend) getInflight() {
	fe.t.Helper()
	p := appendInflightDesc(nil, inflightDesc{queues: uint16(len(fe.q)), queueSize: ringNum})
	if err := fe.send(reqGetInflightFD, 0, p); err != nil {
		fe.t.Fatal(err)
	}
	r := make([]byte, msgHdrLen+inflightDescLen)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(fe.fd, r, oob, 0)
	for err == unix.EINTR { // the runtime's preemption signal, as in readFull
		n, oobn, _, _, err = unix.Recvmsg(fe.fd, r, oob, 0)
	}
	if err != nil || n != len(r) {
		fe.t.Fatalf("GET_INFLIGHT_FD: reply of %d bytes: %v (log: %s)", n, err, fe.log)
	}
	if le.Uint32(r) != reqGetInflightFD || le.Uint32(r[4:]) != flagVersion|flagReply || le.Uint32(r[8:]) != inflightDescLen {
		fe.t.Fatalf("GET_INFLIGHT_FD: reply header % x", r[:msgHdrLen])
	}
	cms, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(cms) != 1 {
		fe.t.Fatalf("GET_INFLIGHT_FD: no descriptor: %v", err)
	}
	fds, err := unix.ParseUnixRights(&cms[0])
	if err != nil || len(fds) != 1 {
		fe.t.Fatalf("GET_INFLIGHT_FD: descriptors %v: %v", fds, err)
	}
	size, off := le.Uint64(r[msgHdrLen:]), le.Uint64(r[msgHdrLen+8:])
	packed := fe.features&featRingPacked != 0
	if want := uint64(len(fe.q)) * inflightQueueLen(packed, ringNum); size != want || off != 0 {
		fe.t.Fatalf("GET_INFLIGHT_FD: %d bytes at %d, want %d at 0", size, off, want)
	}
	fe.inflightFD, fe.inflightLen = fds[0], size
	if fe.inflight, err = unix.Mmap(fds[0], 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		fe.t.Fatal(err)
	}
}

func (fe *frontend) startQueue(i uint32) {
	q := &fe.q[i]
	fe.must(reqSetVringNum, state(i, uint32(q.num)))
	base := uint32(q.availIdx)
	if fe.features&featRingPacked != 0 { // slot 0, wrap counters 1
		q.availWrap, q.usedWrap, base = true, true, 1<<15
	}
	fe.must(reqSetVringBase, state(i, base))
	fe.must(reqSetVringAddr, vringAddrPayload(i, fe.uaddr(q.desc), fe.uaddr(q.used), fe.uaddr(q.avail)))
	fe.must(reqSetVringKick, u64(uint64(i)), q.kick)
	fe.must(reqSetVringCall, u64(uint64(i)), q.call)
	fe.must(reqSetVringErr, u64(uint64(i)), q.err)
	fe.must(reqSetVringEnable, state(i, 1))
}

// setDesc writes descriptor i of queue q.
func (fe *frontend) setDesc(q int, i uint16, addr uint64, n uint32, flags, next uint16) {
	d := fe.mem[fe.q[q].desc+16*uint64(i):]
	le.PutUint64(d, addr)
	le.PutUint32(d[8:], n)
	le.PutUint16(d[12:], flags)
	le.PutUint16(d[14:], next)
}

// offer puts head in the avail ring and kicks the device if it asked for a kick.
func (fe *frontend) offer(q int, heads ...uint16) {
	fq := &fe.q[q]
	old := fq.availIdx
	for _, h := range heads {
		le.PutUint16(fe.mem[fq.avail+4+2*uint64(fq.availIdx%fq.num):], h)
		fq.availIdx++
	}
	le.PutUint16(fe.mem[fq.avail+2:], fq.availIdx)
	if fe.features&featEventIdx != 0 {
		event := le.Uint16(fe.mem[fq.used+4+8*uint64(fq.num):])
		if fq.availIdx-event-1 >= fq.availIdx-old {
			return
		}
	} else if le.Uint16(fe.mem[fq.used:])&usedNoNotify != 0 {
		return
	}
	fe.kick(q)
}

func (fe *frontend) kick(q int) {
	fe.kicks++
	signal(fe.q[q].kick)
}

// sendFrame posts frame with header h on the transmit queue in one descriptor.
func (fe *frontend) sendFrame(h [12]byte, frame []byte) { fe.sendFrameOn(txQueue, h, frame) }

// sendFrameOn is sendFrame on transmit queue ring.
func (fe *frontend) sendFrameOn(ring int, h [12]byte, frame []byte) {
	fq := &fe.q[ring]
	d := fq.availIdx % fq.num
	addr := fq.bufs + uint64(d)*bufSize
	copy(fe.mem[addr:], h[:fe.hdrLen])
	copy(fe.mem[addr+uint64(fe.hdrLen):], frame)
	fe.setDesc(ring, d, addr, uint32(fe.hdrLen+len(frame)), 0, 0)
	fe.offer(ring, d)
}

// postRx posts n receive buffers of size bytes each, one descriptor a chain.
func (fe *frontend) postRx(n int, size uint32) { fe.postRxOn(rxQueue, n, size) }

// postRxOn is postRx on receive queue ring.
func (fe *frontend) postRxOn(ring, n int, size uint32) {
	fq := &fe.q[ring]
	for range n {
		d := fq.availIdx % fq.num
		fe.setDesc(ring, d, fq.bufs+uint64(d)*bufSize, size, descWrite, 0)
		fe.offer(ring, d)
	}
}

// usedEntry is one entry of a used ring.
type usedEntry struct {
	id, n uint32
}

// reap returns the used entries of queue q the driver has not seen.
func (fe *frontend) reap(q int) []usedEntry {
	fq := &fe.q[q]
	idx := le.Uint16(fe.mem[fq.used+2:])
	var out []usedEntry
	for ; fq.usedSeen != idx; fq.usedSeen++ {
		e := fe.mem[fq.used+4+8*uint64(fq.usedSeen%fq.num):]
		out = append(out, usedEntry{le.Uint32(e), le.Uint32(e[4:])})
	}
	// Ask for a call at the next entry, as Linux does once it has taken the used ones.
	le.PutUint16(fe.mem[fq.avail+4+2*uint64(fq.num):], fq.usedSeen)
	return out
}

// calls reads and resets the count of call signals of queue q.
func (fe *frontend) calls(q int) uint64 {
	var b [8]byte
	if _, err := unix.Read(fe.q[q].call, b[:]); err != nil {
		return 0
	}
	return le.Uint64(b[:])
}

// waitCall waits until queue q's call eventfd is signalled.
func (fe *frontend) waitCall(q int) uint64 {
	fe.t.Helper()
	pfd := []unix.PollFd{{Fd: int32(fe.q[q].call), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 10000); err != nil || n == 0 {
		fe.t.Fatalf("no call on queue %d (log: %s)", q, fe.log)
	}
	return fe.calls(q)
}

// received is the header and frame in receive buffer chain e (single-descriptor chains).
func (fe *frontend) received(e usedEntry) (hdr, frame []byte) { return fe.receivedOn(rxQueue, e) }

// receivedOn is received on receive queue ring.
func (fe *frontend) receivedOn(ring int, e usedEntry) (hdr, frame []byte) {
	fq := &fe.q[ring]
	d := fe.mem[fq.desc+16*uint64(e.id):]
	b := fe.mem[le.Uint64(d) : le.Uint64(d)+uint64(e.n)]
	return b[:fe.hdrLen], b[fe.hdrLen:]
}

// waitBroken waits until the device is broken and its log names want.
func (fe *frontend) waitBroken(want string) {
	fe.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if fe.dev.Broken() && bytes.Contains([]byte(fe.log.String()), []byte(want)) {
			return
		}
	}
	fe.t.Fatalf("device not broken with %q; broken %v, log: %s", want, fe.dev.Broken(), fe.log)
}
