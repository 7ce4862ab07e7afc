package regs

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

var le = binary.LittleEndian

func TestWriteQueueOrderAndCorruption(t *testing.T) {
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&make([]uint64, WriteQueueSize/8)[0])), WriteQueueSize)
	q, err := NewWriteQueue(mem)
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint32(wqSlots) {
		if !q.post(i*4, i) {
			t.Fatalf("queue full after %d of %d", i, wqSlots)
		}
	}
	if q.post(0, 0) {
		t.Fatal("posted into a full queue")
	}
	var got []uint32
	n, corrupt := q.Drain(func(off, v uint32) {
		if off != v*4 {
			t.Fatalf("entry (%d, %d) out of order", off, v)
		}
		got = append(got, v)
	})
	if n != wqSlots || corrupt || !q.Empty() {
		t.Fatalf("drained %d (corrupt %v), want %d", n, corrupt, wqSlots)
	}
	// A head from the other process claiming more than a queue's worth is skipped, not read.
	le.PutUint32(mem[wqHead:], 0x7fffffff)
	if n, corrupt := q.Drain(func(uint32, uint32) { t.Fatal("applied a corrupt entry") }); n != 0 || !corrupt {
		t.Fatalf("corrupt head: drained %d, corrupt %v", n, corrupt)
	}
}

func TestPostedRegistersStall(t *testing.T) {
	q, _ := NewWriteQueue(make([]byte, WriteQueueSize))
	p, err := NewPostedRegisters(make([]byte, RegisterPageSize), q, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range wqSlots {
		p.Write32(TDT, 1)
	}
	p.Write32(TDT, 2) // nobody drains: gives up after the timeout, counted
	if p.Stalls.Load() != 1 {
		t.Fatalf("stalls %d, want 1", p.Stalls.Load())
	}
}

// A quiet post (RDT) rings no doorbell; the next read, which waits for it to land, rings one
// (a device asleep would never drain it else), and a write after the quiet post rings as ever.
func TestPostQuietRingsAtTheNextRead(t *testing.T) {
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&make([]uint64, WriteQueueSize/8)[0])), WriteQueueSize)
	q, _ := NewWriteQueue(mem)
	page := make([]byte, RegisterPageSize)
	kicks := 0
	p, err := NewPostedRegisters(page, q, func() {
		kicks++
		q.Drain(func(off, v uint32) { le.PutUint32(page[off:], v) })
	})
	if err != nil {
		t.Fatal(err)
	}
	p.PostQuiet(RDT, 7)
	if kicks != 0 || q.Empty() {
		t.Fatalf("quiet post: %d doorbells, queue empty %v", kicks, q.Empty())
	}
	if got := p.Read32(RDT); got != 7 || kicks != 1 {
		t.Fatalf("read after a quiet post: %d with %d doorbells, want 7 with 1", got, kicks)
	}
	p.Read32(RDT)
	p.PostQuiet(RDT, 8)
	q.Drain(func(off, v uint32) { le.PutUint32(page[off:], v) }) // the wire's receive path
	if got := p.Read32(RDT); got != 8 || kicks != 1 {
		t.Fatalf("read after the device drained: %d with %d doorbells, want 8 with 1", got, kicks)
	}
	p.Write32(TDT, 1)
	if kicks != 2 {
		t.Fatalf("a write rang %d doorbells in all, want 2", kicks)
	}
}

func TestEventfd(t *testing.T) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	e := Eventfd(fd)
	e.Raise()
	e.Raise() // coalesces
	if err := e.Wait(); err != nil {
		t.Fatal(err)
	}
	unix.SetNonblock(fd, true)
	if err := e.Wait(); err != unix.EAGAIN {
		t.Fatalf("second wait: %v, want EAGAIN (signals coalesced)", err)
	}
}
