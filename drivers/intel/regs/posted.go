package regs

import (
	"errors"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Between processes the driver maps the register page and a write queue next to it. Reads are
// loads from the page (ICR's read-to-clear an atomic swap); writes are posted to the queue, in
// order, and the device applies them with their side effects, as a hypervisor applies trapped
// MMIO writes. A read first waits for the posted writes to land, as PCIe reads push posted
// writes ahead of them.

// WriteQueueSize is the size of the posted-write queue's shared memory.
const WriteQueueSize = 4096

const (
	wqHead    = 0   // producer (driver) index
	wqTail    = 128 // consumer (device) index, on its own cache line
	wqEntries = 256
	wqSlots   = (WriteQueueSize - wqEntries) / 8 / 256 * 256 // a power of two
)

// WriteQueue is the posted-write queue over shared memory: entries of (offset, value).
type WriteQueue struct{ mem []byte }

// NewWriteQueue uses mem (WriteQueueSize bytes, 8-byte aligned) as a write queue. A freshly
// created (zeroed) region is an empty queue.
func NewWriteQueue(mem []byte) (*WriteQueue, error) {
	if len(mem) < WriteQueueSize || uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return nil, errors.New("intel: write queue needs 4096 bytes, 8-byte aligned")
	}
	return &WriteQueue{mem: mem[:WriteQueueSize]}, nil
}

func (q *WriteQueue) word(off int) *uint32 { return (*uint32)(unsafe.Pointer(&q.mem[off])) }

// post appends one write; false when the queue is full.
func (q *WriteQueue) post(off, v uint32) bool {
	head := atomic.LoadUint32(q.word(wqHead))
	if head-atomic.LoadUint32(q.word(wqTail)) >= wqSlots {
		return false
	}
	e := wqEntries + int(head%wqSlots)*8
	atomic.StoreUint32(q.word(e), off)
	atomic.StoreUint32(q.word(e+4), v)
	atomic.StoreUint32(q.word(wqHead), head+1)
	return true
}

// Empty reports whether the device has applied every posted write.
func (q *WriteQueue) Empty() bool {
	return atomic.LoadUint32(q.word(wqHead)) == atomic.LoadUint32(q.word(wqTail))
}

// Drain applies every posted write in order and returns how many there were. The head comes
// from the driver's process: a head that claims more than a queue's worth is corrupt, and the
// queue is skipped to it (counted by the caller as bad).
func (q *WriteQueue) Drain(apply func(off, v uint32)) (n int, corrupt bool) {
	head := atomic.LoadUint32(q.word(wqHead))
	tail := atomic.LoadUint32(q.word(wqTail))
	if head-tail > wqSlots {
		atomic.StoreUint32(q.word(wqTail), head)
		return 0, true
	}
	for ; tail != head; tail++ {
		e := wqEntries + int(tail%wqSlots)*8
		apply(atomic.LoadUint32(q.word(e)), atomic.LoadUint32(q.word(e+4)))
		n++
	}
	atomic.StoreUint32(q.word(wqTail), tail)
	return n, false
}

// PostedRegisters is the driver's MMIO access to a device in another process: the shared
// register page, the write queue, and a doorbell that wakes the device after a write. The
// queue has one producer: use it from the driver's goroutine only.
type PostedRegisters struct {
	page   []byte
	q      *WriteQueue
	kick   func()
	quiet  bool          // writes posted without the doorbell since it last rang
	Stalls atomic.Uint64 // reads or writes that gave up waiting for the device
}

// flushTimeout bounds how long a read waits for posted writes, or a write for queue room,
// when the device's process stalls.
const flushTimeout = time.Second

// NewPostedRegisters makes the driver's side over the page (RegisterPageSize bytes) and queue.
func NewPostedRegisters(page []byte, q *WriteQueue, kick func()) (*PostedRegisters, error) {
	if len(page) < RegisterPageSize || uintptr(unsafe.Pointer(&page[0]))%16 != 0 {
		return nil, errors.New("intel: register page needs 128 KiB, 16-byte aligned")
	}
	return &PostedRegisters{page: page[:RegisterPageSize], q: q, kick: kick}, nil
}

// backoff waits a little before attempt i+1: spins first, then sleeps; false once the
// timeout has passed.
func (p *PostedRegisters) backoff(i int, deadline *time.Time) bool {
	switch {
	case i < 64:
		runtime.Gosched()
	case i == 64:
		*deadline = time.Now().Add(flushTimeout)
	case time.Now().After(*deadline):
		p.Stalls.Add(1)
		return false
	default:
		time.Sleep(5 * time.Microsecond)
	}
	return true
}

// Read32 reads a register once the posted writes have landed. ICR clears on read.
func (p *PostedRegisters) Read32(off uint32) uint32 {
	if !InPage(off) {
		return 0
	}
	if p.quiet && !p.q.Empty() {
		p.ring()
	}
	var deadline time.Time
	for i := 0; !p.q.Empty() && p.backoff(i, &deadline); i++ {
	}
	reg := (*uint32)(unsafe.Pointer(&p.page[off]))
	if off == ICR {
		return atomic.SwapUint32(reg, 0)
	}
	return atomic.LoadUint32(reg)
}

// Write32 posts a write and rings the doorbell.
func (p *PostedRegisters) Write32(off, v uint32) {
	if p.post(off, v) {
		p.ring()
	}
}

// PostQuiet posts a write without ringing the doorbell, for RDT: the device applies posted
// writes before it takes frames from the wire (and at its next doorbell, timer or the
// driver's next read), which is the only time it looks at RDT. The doorbell, a system call
// here and a wakeup of the device's process, cost one per interrupt.
func (p *PostedRegisters) PostQuiet(off, v uint32) {
	if p.post(off, v) {
		p.quiet = true
	}
}

func (p *PostedRegisters) post(off, v uint32) bool {
	var deadline time.Time
	for i := 0; !p.q.post(off, v); i++ {
		if p.quiet {
			p.ring() // the device drains a full queue only when told
		}
		if !p.backoff(i, &deadline) {
			return false
		}
	}
	return true
}

func (p *PostedRegisters) ring() {
	p.quiet = false
	if p.kick != nil {
		p.kick()
	}
}

// Eventfd is an eventfd used as an interrupt line or a doorbell; signals coalesce in its count.
// Its Wait is a plain blocking read, for tests and benchmarks that give each side a thread of
// its own; the components use devsession.Eventfd, which waits in Go's netpoller.
type Eventfd int

// Raise adds one to the eventfd's count.
func (e Eventfd) Raise() {
	one := [8]byte{1}
	unix.Write(int(e), one[:])
}

// Wait blocks until the eventfd is signalled and resets its count.
func (e Eventfd) Wait() error {
	var buf [8]byte
	_, err := unix.Read(int(e), buf[:])
	return err
}
