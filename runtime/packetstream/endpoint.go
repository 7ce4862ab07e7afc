package packetstream

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/netdev"
)

// Packet names a frame in a stream's bulk buffer. A source gets it from Alloc, may lower Size
// and attach offload metadata (WithOffload) before submitting; a sink gets it from TryGet,
// reads netdev.Offload and hands it back to TryAck unchanged.
//
// The offload metadata is kept packed so that a Packet has four scalar fields: Go then keeps
// it in registers, where a struct holding an Offload (six fields) would be spilled field by
// field and copied whole, a store-forwarding stall that waits for every pending store to
// shared memory.
type Packet struct {
	Offset uint32 // from the start of the region
	Size   uint32 // frame bytes
	gso    uint64 // Flags<<56 | GSOType<<48 | HdrLen<<32 | GSOSize<<16 | CsumStart
	csum   uint16 // CsumOffset
}

// Offload returns the packet's offload metadata.
func (p Packet) Offload() netdev.Offload {
	return netdev.Offload{Flags: uint8(p.gso >> 56), GSOType: uint8(p.gso >> 48), HdrLen: uint16(p.gso >> 32),
		GSOSize: uint16(p.gso >> 16), CsumStart: uint16(p.gso), CsumOffset: p.csum}
}

// HasOffload reports whether p carries offload metadata (its Offload is not all zero), without
// building it.
func (p Packet) HasOffload() bool { return p.gso|uint64(p.csum) != 0 }

// WithOffload returns p carrying o. (The packing order differs from netdev.Offload's memory layout on
// purpose: the compiler would otherwise merge the field loads into one wide load.)
func (p Packet) WithOffload(o netdev.Offload) Packet {
	p.gso = uint64(o.Flags)<<56 | uint64(o.GSOType)<<48 | uint64(o.HdrLen)<<32 | uint64(o.GSOSize)<<16 | uint64(o.CsumStart)
	p.csum = o.CsumOffset
	return p
}

// Counters of one endpoint, for reports and benchmarks. The per-frame path adds to private
// counts and moves them here once per batch (Wakeup or eager call).
type Counters struct {
	Frames          atomic.Uint64 // frames submitted (source) or valid frames received (sink)
	Bytes           atomic.Uint64 // their bytes
	Invalid         atomic.Uint64 // descriptors or queue indices from the peer that failed a check
	SignalsSent     atomic.Uint64 // eventfd writes to the peer
	SignalsReceived atomic.Uint64 // eventfd reads that found a signal
	Sleeps          atomic.Uint64 // times a wait armed and blocked
}

var (
	// ErrExhausted is Alloc's answer when the bulk buffer has no free run that fits: release
	// acknowledged packets and try again.
	ErrExhausted = errors.New("packetstream: bulk buffer exhausted")
	// ErrClosed is what waits return once the endpoint or waiter is closed.
	ErrClosed = errors.New("packetstream: closed")
)

// endpoint is what Source and Sink share: the region, the eventfd to wait on, the eventfd to
// signal, and a private waiter for the eager calls.
type endpoint struct {
	reg     *region
	in, out int // eventfds, non-blocking
	own     *Waiter
	ctr     Counters
	frames  uint64 // not yet moved to ctr
	bytes   uint64
	invalid uint64
	tapState
}

// newEndpoint takes ownership of reg, in and out (and releases them if it fails), and gives
// the endpoint its own Waiter over ep for the eager calls.
func newEndpoint(reg *region, in, out int, ep func(*endpoint) Endpoint) (*endpoint, error) {
	e := &endpoint{reg: reg, in: in, out: out}
	for _, fd := range []int{in, out} {
		if err := unix.SetNonblock(fd, true); err != nil {
			e.Close()
			return nil, fmt.Errorf("packetstream: %w", err)
		}
	}
	var err error
	if e.own, err = NewWaiter(ep(e)); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// dupFile duplicates f's descriptor (close-on-exec) without touching f's blocking mode.
func dupFile(f *os.File) (int, error) {
	var nfd int
	var err error
	if cerr := control(f, func(fd int) { nfd, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		return -1, cerr
	}
	return nfd, err
}

func (e *endpoint) signal() {
	if eventfdWrite(e.out) {
		e.ctr.SignalsSent.Add(1)
	}
}

// drain resets our eventfd after a wake; it is read only when epoll said it was readable.
func (e *endpoint) drain() {
	var b [8]byte
	if _, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(e.in), uintptr(unsafe.Pointer(&b[0])), 8); errno == 0 {
		e.ctr.SignalsReceived.Add(1)
	}
}

// eventfdWrite adds 1 to a non-blocking eventfd. The system call is raw: it never blocks, and
// the runtime's bookkeeping around an ordinary one woke the scheduler's monitor thread at every
// signal, which then polled every 20 µs (a pinned driver lost a quarter of its CPU to it).
func eventfdWrite(fd int) bool {
	one := uint64(1)
	_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&one)), 8)
	return errno == 0
}

func (e *endpoint) flush() {
	if e.frames != 0 {
		e.ctr.Frames.Add(e.frames)
		e.ctr.Bytes.Add(e.bytes)
		e.frames, e.bytes = 0, 0
	}
	if e.invalid != 0 {
		e.ctr.Invalid.Add(e.invalid)
		e.invalid = 0
	}
}

// Counters returns the endpoint's counters.
func (e *endpoint) Counters() *Counters { return &e.ctr }

// Config returns the stream's config.
func (e *endpoint) Config() Config { return e.reg.cfg }

// Close unmaps the region and closes the endpoint's eventfds. No call may run concurrently.
func (e *endpoint) Close() error {
	var err error
	if e.own != nil {
		err = e.own.Close()
	}
	return errors.Join(err, unix.Close(e.in), unix.Close(e.out), e.reg.unmap())
}

// openSide maps the stream's region for one side and dups the eventfds that side uses.
func openSide(f *StreamFiles, source bool) (reg *region, in, out int, err error) {
	if err := f.Cfg.Validate(); err != nil {
		return nil, -1, -1, err
	}
	if reg, err = mapRegion(f.Mem, f.Cfg); err != nil {
		return nil, -1, -1, err
	}
	if in, out, err = sideFds(f, source); err != nil {
		reg.unmap()
		return nil, -1, -1, err
	}
	return reg, in, out, nil
}

// sideFds dups the stream's eventfds for one side: the source waits on ToSource and
// signals ToSink, the sink the other way round.
func sideFds(f *StreamFiles, source bool) (in, out int, err error) {
	a, b := f.ToSource, f.ToSink
	if !source {
		a, b = b, a
	}
	if in, err = dupFile(a); err != nil {
		return -1, -1, fmt.Errorf("packetstream: %w", err)
	}
	if out, err = dupFile(b); err != nil {
		unix.Close(in)
		return -1, -1, fmt.Errorf("packetstream: %w", err)
	}
	return in, out, nil
}
