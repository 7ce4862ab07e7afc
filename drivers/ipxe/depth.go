package ipxe

import (
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/netdev"
)

// ringDepth is what the driver publishes so that any goroutine can ask how deep its rings
// stand (TXQueue, RXQueue) while the event loop runs. The loop writes atomics once per
// Transmit, reap and RX pass, never per frame; the rest is computed when asked, from the
// descriptors' status words, which driver and device write atomically anyway.
type ringDepth struct {
	// TX counts frames with free-running indices: txMarks holds each Transmit batch (the
	// frames handed to the NIC up to it, their bytes, its time), done the frames reaped,
	// and base the count at the last ring reset, where descriptor 0 was next.
	txMarks     netdev.Marks
	txQueued    uint32 // frames handed to the NIC, privately
	reaped      uint32 // frames reaped, privately
	txPublished atomic.Uint32
	done        atomic.Uint32
	base        atomic.Uint32
	// RX: the next descriptor the driver takes, and when it last looked at the ring.
	rxNext atomic.Uint32
	rxLook atomic.Int64
}

// reset follows a ring reset at now: what was in flight is gone, descriptor 0 is next, and
// the driver has looked at the empty RX ring.
func (r *ringDepth) reset(now time.Duration) {
	r.reaped = r.txQueued
	r.base.Store(r.txQueued)
	r.done.Store(r.reaped)
	r.looked(0, now)
}

// queued publishes a Transmit batch of frames and bytes handed to the NIC at now.
func (r *ringDepth) queued(frames, bytes int, now time.Duration) {
	r.txQueued += uint32(frames)
	r.txMarks.Put(r.txQueued, uint64(bytes), now)
	r.txPublished.Store(r.txQueued)
}

// publishReaped publishes the reaped count once per reap, if it moved.
func (r *ringDepth) publishReaped() {
	if r.done.Load() != r.reaped {
		r.done.Store(r.reaped)
	}
}

// looked publishes an RX pass that began at look and stopped before descriptor next.
func (r *ringDepth) looked(next uint32, look time.Duration) {
	r.rxNext.Store(next)
	r.rxLook.Store(int64(look))
}

// TXQueue is the TX ring's depth: frames handed to the NIC and not yet written back (DD),
// their bytes (exact at a Transmit batch's edge, interpolated within one) and the age of the
// oldest's batch. Any goroutine may ask.
func (d *Driver) TXQueue() netdev.Depth {
	r := &d.rings
	// A snapshot the driver did not reap in the middle of, else a stale tail would count
	// descriptors it reused; tried a few times, then the queue counts as full.
	var tail, head, base uint32
	for range 3 {
		tail, head, base = r.done.Load(), r.txPublished.Load(), r.base.Load()
		if r.done.Load() == tail {
			break
		}
	}
	// Descriptors written back and not yet reaped have left the queue.
	for n := 0; tail != head && n < RingSize; n++ {
		desc := txRing + (tail-base)%RingSize*regs.DescSize
		if atomic.LoadUint32(d.statusWord(desc))&regs.TxStaDD == 0 {
			break
		}
		tail++
	}
	return r.txMarks.Depth(tail, RingSize-1, d.clock.Now())
}

// RXQueue is the RX ring's depth: descriptors the NIC filled that the driver has not yet
// taken, with their bytes. The NIC does not say when it filled one; the sojourn is the time
// since the driver last looked at the ring, which bounds the oldest's. Any goroutine may ask.
func (d *Driver) RXQueue() netdev.Depth {
	r := &d.rings
	var q netdev.Depth
	for i := r.rxNext.Load(); q.Frames < RingSize-1; i = (i + 1) % RingSize {
		// Length and status in one load: the driver re-arms a descriptor with one store.
		w := atomic.LoadUint64(d.lenStatus(rxRing + i*regs.DescSize))
		if uint32(w>>32)&regs.RxStatusDD == 0 {
			break
		}
		q.Frames++
		q.Bytes += w & 0xffff
	}
	if q.Frames > 0 {
		q.Sojourn = max(0, d.clock.Now()-time.Duration(r.rxLook.Load()))
	}
	return q
}
