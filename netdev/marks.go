package netdev

import (
	"sync/atomic"
	"time"
)

// Marks meter one queue between a producer and a consumer that count their frames with
// free-running 32-bit indices (a packet stream's submit queue, a descriptor ring): the
// producer records one mark per published batch (its head, the bytes up to it, the time),
// and Depth computes what waits in front of the consumer's tail when asked, from any
// goroutine. Nothing is added per frame; the producer's clock is read once per batch.
type Marks struct {
	ring    []mark
	n       atomic.Uint64 // marks written, stored after the mark
	written uint64        // n, privately
	head    uint32        // head at the last mark
	bytes   uint32        // bytes produced up to it
}

// mark is one batch as the producer published it: the head after it with the bytes produced
// up to it (mod 2^32: a queue never holds 4 GiB), and when it was published.
type mark struct {
	headBytes atomic.Uint64 // head | bytes<<32
	at        atomic.Int64  // the producer's clock
}

// NewMarks meters a queue of at most queueSize frames (a power of two). Each batch holds at
// least one frame, so a ring of twice that many marks covers every frame the queue can hold
// together with the mark before the oldest, which says where that batch began.
func NewMarks(queueSize int) Marks {
	return Marks{ring: make([]mark, 2*queueSize)}
}

// Head is the producer's head at the last mark.
func (m *Marks) Head() uint32 { return m.head }

// Put records a batch of batchBytes that moved the producer's head to head at now (a clock
// of the producer's, the one Depth is asked with). Only the producer calls it.
func (m *Marks) Put(head uint32, batchBytes uint64, now time.Duration) {
	m.head = head
	m.bytes += uint32(batchBytes)
	k := m.written
	e := &m.ring[k&uint64(len(m.ring)-1)]
	e.headBytes.Store(uint64(head) | uint64(m.bytes)<<32)
	e.at.Store(int64(now))
	m.written = k + 1
	m.n.Store(k + 1)
}

// get reads mark k; the mark before the first is the queue's start.
func (m *Marks) get(k int64) (head, bytes uint32, at int64) {
	if k < 0 {
		return 0, 0, 0
	}
	e := &m.ring[uint64(k)&uint64(len(m.ring)-1)]
	hb := e.headBytes.Load()
	return uint32(hb), uint32(hb >> 32), e.at.Load()
}

// Depth is what waits in front of a consumer whose tail is tail, in a queue of size entries,
// at now. A tail that would put more than size frames in the queue is the peer's error: the
// queue counts as full. The bytes are exact when the tail stands at a batch's edge, and
// interpolated within the batch it stands in otherwise; the sojourn is the oldest waiting
// frame's batch's. A read the producer overtook (it wrote a whole ring of marks meanwhile) is
// tried again.
func (m *Marks) Depth(tail, size uint32, now time.Duration) Depth {
	for try := 0; ; try++ {
		n := int64(m.n.Load())
		if n == 0 {
			return Depth{}
		}
		lastHead, lastBytes, _ := m.get(n - 1)
		waiting := lastHead - tail
		if waiting == 0 || int32(waiting) < 0 {
			return Depth{}
		}
		if waiting > size {
			waiting, tail = size, lastHead-size
		}
		k := n - 1 // the batch that holds the oldest frame waiting
		for k > 0 && n-k < int64(len(m.ring))-1 {
			if h, _, _ := m.get(k - 1); int32(h-tail) <= 0 {
				break
			}
			k--
		}
		prevHead, prevBytes, _ := m.get(k - 1)
		head, bytes, at := m.get(k)
		if overtaken := uint64(m.n.Load()) - uint64(k) + 1; overtaken >= uint64(len(m.ring)) && try < 3 {
			continue
		}
		taken := prevBytes // bytes before tail
		if frames := head - prevHead; frames != 0 {
			taken += uint32(uint64(bytes-prevBytes) * uint64(tail-prevHead) / uint64(frames))
		}
		return Depth{
			Frames:  uint64(waiting),
			Bytes:   uint64(lastBytes - taken),
			Sojourn: max(0, now-time.Duration(at)),
		}
	}
}
