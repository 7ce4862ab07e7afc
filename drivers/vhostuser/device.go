// Package vhostuser is the vhost-user-net back end: it serves one front end (QEMU 7.2+,
// libvirt, DPDK's virtio-user) over a connected Unix socket, maps the guest's memory once, and
// moves the guest's frames through its virtqueues (split or packed, one or more queue pairs:
// packed.go, mq.go, ctrl.go; tracked in an inflight region: inflight.go) as a netdev.Device, with each frame's virtio-net header
// as netdev.Offload. It is a library: no process, no packet stream; the vm component's glue
// pumps it like a TAP.
//
// Everything the guest or the front end hands over is untrusted: every guest address is
// translated through the memory table and checked to lie inside one mapped region, chains are
// bounded by the queue size, indices by the queue, messages by their type's size and number of
// descriptors. A fault marks the device broken (the virtio NEEDS_RESET state: no queue is
// processed until the driver resets the device), is logged with the queue and the fault, and
// counted; a fault in a message also ends the connection, whose stream can no longer be
// trusted. The data path takes a batch per wakeup: one call signal per batch, kicks
// suppressed while it is busy (EVENT_IDX's avail_event, or NO_NOTIFY), no system call per
// frame.
package vhostuser

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/netdev"
)

// Feature bits the back end offers (virtio 1.x; the virtio-net ones of 5.1.3).
const (
	featCsum         = 1 << 0
	featGuestCsum    = 1 << 1
	featGuestTSO4    = 1 << 7
	featGuestTSO6    = 1 << 8
	featGuestECN     = 1 << 9
	featHostTSO4     = 1 << 11
	featHostTSO6     = 1 << 12
	featHostECN      = 1 << 13
	featMrgRxbuf     = 1 << 15
	featAnyLayout    = 1 << 27
	featEventIdx     = 1 << 29
	featProtocol     = 1 << 30 // VHOST_USER_F_PROTOCOL_FEATURES
	featVersion1     = 1 << 32
	offeredFeatures  = featCsum | featGuestCsum | featGuestTSO4 | featGuestTSO6 | featGuestECN | featHostTSO4 | featHostTSO6 | featHostECN | featMrgRxbuf | featAnyLayout | featEventIdx | featProtocol | featVersion1
	protoMQ          = 1 << 0
	protoReplyAck    = 1 << 3
	offeredProtocols = protoMQ | protoReplyAck | protoInflight
)

// Queues: the one pair of a virtio-net device without MQ.
const (
	rxQueue = 0 // device to driver: frames Write hands the guest
	txQueue = 1 // driver to device: frames Read takes from the guest
)

// ErrClosed is returned by Read and Write once the connection has ended.
var ErrClosed = errors.New("vhost-user: connection closed")

// Stats are the counters of a back end, shared by its successive connections. They point to
// storage the caller may own (a component's named counters).
type Stats struct {
	RxFrames, RxBytes *atomic.Uint64 // frames the guest sent, handed to Read
	RxDropped         *atomic.Uint64 // the guest's frames too large for Read's buffers, or with invalid headers
	TxFrames, TxBytes *atomic.Uint64 // frames Write put in the guest's buffers
	TxDropped         *atomic.Uint64 // frames Write could not hand over: no buffers, no room, offloads not negotiated, device not running
	Calls             *atomic.Uint64 // call signals to the guest: at most one per batch
	Kicks             *atomic.Uint64 // wakeups by the guest's kicks
	Faults            *atomic.Uint64 // faults of the guest or the front end, each marking its device broken
	Sessions          *atomic.Uint64 // connections served
	// counter gives the per-pair frame counters of a device with more than one pair
	// (vhost_rx_frames_pairP, vhost_tx_frames_pairP: SetQueuePairs), which show each pair
	// carries its share.
	counter func(name string) *atomic.Uint64
}

// NewStats returns Stats whose counters get provides by name; nil: private ones.
func NewStats(get func(name string) *atomic.Uint64) *Stats {
	if get == nil {
		get = func(string) *atomic.Uint64 { return new(atomic.Uint64) }
	}
	return &Stats{
		RxFrames: get("vhost_rx_frames"), RxBytes: get("vhost_rx_bytes"), RxDropped: get("vhost_rx_dropped"),
		TxFrames: get("vhost_tx_frames"), TxBytes: get("vhost_tx_bytes"), TxDropped: get("vhost_tx_dropped"),
		Calls: get("vhost_calls"), Kicks: get("vhost_kicks"), Faults: get("vhost_faults"), Sessions: get("vhost_sessions"),
		counter: get,
	}
}

// Device is one connection's virtio-net device. Serve runs the protocol; Read and Write are
// its data path (netdev.Device), one goroutine each.
type Device struct {
	conn  *net.UnixConn
	log   *slog.Logger
	stats *Stats

	mu          sync.Mutex // the device state below; queue state is each queue's
	features    uint64     // acked by SET_FEATURES
	protocol    uint64     // acked by SET_PROTOCOL_FEATURES
	protocolSet bool       // SET_PROTOCOL_FEATURES came
	protocols   uint64     // the protocol features offered: offeredProtocols, less what the process cannot do
	mem         *memTable
	inflight    *inflightRegion // GET_ or SET_INFLIGHT_FD's; set and read under every queue's lock
	hdrLen      int             // the virtio-net header: 12 with VERSION_1 or MRG_RXBUF, else 10

	pairs  int          // queue pairs offered (SetQueuePairs; 1 without MQ)
	q      []queue      // the pairs' rings (receive even, transmit odd), then the control queue with MQ
	active atomic.Int32 // pairs in use: VQ_PAIRS_SET's when the control queue is the device's, else all
	extra  atomic.Bool  // a ring past the device's was set up: logged once

	broken atomic.Bool
	closed atomic.Bool
	done   chan struct{} // closed when Serve has ended and every queue is let go

	keeper func(record []byte, fds []int) // takeover.go: handed the connection's state after each change
	keepMu sync.Mutex                     // one keep at a time, so that the keeper's last is the newest

	rxWait time.Duration
	tx     txState // Write's
}

// queue is a vring with what the control path sets and the data path uses: mu is held by the
// data path for a batch and by the control path to change anything here.
type queue struct {
	mu sync.Mutex
	vring
	mem     *memTable
	hasAddr bool
	addr    vringAddr
	started bool // SET_VRING_KICK came (and no GET_VRING_BASE since)
	enabled bool
	kick    *kicker
	call    int             // eventfd or -1
	errFD   int             // eventfd or -1
	changed chan struct{}   // a token when the control path changed the queue
	pending []usedElem      // Write's used entries of the frame being placed
	hdr     [maxHdrLen]byte // the reader's header scratch
	off     netdev.Offload  // the reader's frame's offload metadata
	bufs    netdev.Buffers  // Read's Target (a transmit queue has one reader)
	frames  *atomic.Uint64  // the frames through this ring, with more than one pair; else nil
}

type usedElem struct {
	head uint16
	n    uint32
}

func (q *queue) ready() bool { return q.started && q.enabled && q.hasAddr && q.mem != nil && q.num > 0 }

// New returns the device of connection conn, logging to log (nil: nowhere) and counting in
// stats (nil: privately). Serve runs it.
func New(conn *net.UnixConn, log *slog.Logger, stats *Stats) *Device {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if stats == nil {
		stats = NewStats(nil)
	}
	d := &Device{conn: conn, log: log, stats: stats, hdrLen: 10, rxWait: rxWait, done: make(chan struct{}), protocols: offeredProtocols}
	if !canMakeRegion() {
		d.protocols &^= protoInflight
		log.Warn("INFLIGHT_SHMFD is not offered: this process cannot make the region (memfd_create)")
	}
	d.SetQueuePairs(1)
	stats.Sessions.Add(1)
	return d
}

// Broken reports whether a fault has stopped the device.
func (d *Device) Broken() bool { return d.broken.Load() }

// Close ends the connection: Serve returns, and Read and Write return ErrClosed.
func (d *Device) Close() error {
	d.closed.Store(true)
	return d.conn.Close()
}

// breakDown marks the device broken by err (a fault or a refused message): no queue is
// processed until the driver resets the device, the guest's error eventfd of the queue is
// signalled, and a line names the queue and the fault. No queue lock may be held.
func (d *Device) breakDown(err error, q *queue) {
	d.broken.Store(true)
	if q != nil {
		q.mu.Lock()
		if q.errFD >= 0 {
			signal(q.errFD)
		}
		q.mu.Unlock()
	}
	d.stats.Faults.Add(1)
	d.log.Error("vhost-user device broken, needs reset", "fault", err.Error())
	for i := range d.q {
		o := &d.q[i]
		o.mu.Lock()
		o.wake()
		o.mu.Unlock()
	}
}

// guard turns a memory fault in the data path (the front end shrank a region's file under
// the mapping) into a device fault instead of a crash; Read and Write defer it, their batches
// hold the queue's lock with a deferred unlock.
func (d *Device) guard(q *queue, old bool) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		d.breakDown(q.faultf("guest memory faulted: %v", r), q)
	}
}

// kicker waits for a queue's kick eventfd in Go's netpoller.
type kicker struct {
	f    *os.File
	rc   syscall.RawConn
	fn   func(uintptr) bool
	kick bool
}

func newKicker(fd int) (*kicker, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	k := &kicker{f: os.NewFile(uintptr(fd), "vhost-user-kick")}
	rc, err := k.f.SyscallConn()
	if err != nil {
		k.f.Close()
		return nil, err
	}
	k.rc = rc
	k.fn = func(fd uintptr) bool {
		var b [8]byte
		_, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), 8)
		if e == unix.EAGAIN {
			return false
		}
		k.kick = e == 0
		return true
	}
	return k, nil
}

// wait blocks until a kick (or wake) and reports whether one came before deadline (zero:
// none); false also when the kicker was closed.
func (k *kicker) wait(deadline time.Time) bool {
	k.kick = false
	k.f.SetReadDeadline(deadline)
	err := k.rc.Read(k.fn)
	return err == nil && k.kick
}

// wake makes a waiter of q look at the queue again (q.mu held): its state changed.
func (q *queue) wake() {
	select {
	case q.changed <- struct{}{}:
	default:
	}
	if q.kick != nil {
		signal(int(q.kick.f.Fd()))
	}
}

// waitFor blocks until k is kicked (or woken) or deadline passes, or without k until the
// queue changes; it reports whether a kick came.
func (q *queue) waitFor(k *kicker, deadline time.Time) bool {
	if k != nil {
		return k.wait(deadline)
	}
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-q.changed:
		return true
	case <-timeout:
		return false
	}
}

// signal adds one to eventfd fd.
func signal(fd int) {
	one := uint64(1)
	unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&one)), 8)
}

// stop lets go of the queue's ring and descriptors (q.mu held).
func (q *queue) stop() {
	if q.kick != nil {
		q.kick.f.Close()
		q.kick = nil
	}
	q.started = false
	q.inf = nil // the next start tracks the ring afresh
}

func (q *queue) closeFDs() {
	q.stop()
	for _, fd := range []*int{&q.call, &q.errFD} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// Done is closed once Serve has ended and the device has let go of the guest's memory.
func (d *Device) Done() <-chan struct{} { return d.done }

// Accept waits for the next front end on ln and returns its fresh device; the caller runs
// Serve and the data path.
func Accept(ln *net.UnixListener, log *slog.Logger, stats *Stats) (*Device, error) {
	conn, err := ln.AcceptUnix()
	if err != nil {
		return nil, err
	}
	return New(conn, log, stats), nil
}
