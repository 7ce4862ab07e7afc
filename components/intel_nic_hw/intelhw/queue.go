package intelhw

import (
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/netdev"
)

// wireQueue is what waits on the paced wire toward the device: frames taken from the far end
// (its session or a Port) in one burst that the wire has not yet carried into the RX ring.
// The loop that clocks them in publishes it once per Receive, any goroutine reads it. The
// transmit side has no such queue: the device takes a frame from its TX ring only when the
// wire is free for it and hands it on at once, so what waits there is the driver's TX ring.
type wireQueue struct {
	clock regs.Clock
	// The frames (at most a burst, rxBatch) and bytes waiting in one word, so that a reader
	// sees them together, and when their burst came off the far end.
	framesBytes atomic.Uint64
	since       atomic.Int64
	bytes       uint64 // the loop's running count
}

const queueBytesBits = 48

// hold publishes a burst just taken from the far end.
func (q *wireQueue) hold(frames [][]byte) {
	q.bytes = 0
	for _, f := range frames {
		q.bytes += uint64(len(f))
	}
	q.since.Store(int64(q.clock.Now()))
	q.framesBytes.Store(uint64(len(frames))<<queueBytesBits | q.bytes)
}

// took publishes that the frames taken of the burst are gone, with rest still waiting.
func (q *wireQueue) took(taken, rest [][]byte) {
	if len(taken) == 0 {
		return
	}
	for _, f := range taken {
		q.bytes -= uint64(len(f))
	}
	q.framesBytes.Store(uint64(len(rest))<<queueBytesBits | q.bytes)
}

// clear publishes that nothing waits any more.
func (q *wireQueue) clear() {
	q.bytes = 0
	q.framesBytes.Store(0)
}

// Depth is what waits on the wire now.
func (q *wireQueue) Depth() netdev.Depth {
	fb := q.framesBytes.Load()
	frames := fb >> queueBytesBits
	if frames == 0 {
		return netdev.Depth{}
	}
	return netdev.Depth{
		Frames:  frames,
		Bytes:   fb & (1<<queueBytesBits - 1),
		Sojourn: max(0, q.clock.Now()-time.Duration(q.since.Load())),
	}
}
