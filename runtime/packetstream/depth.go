package packetstream

import (
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/netdev"
)

// The depth of a stream is computed when asked (status time), from any goroutine, from what
// the source records once per batch and the sink's tail. Nothing is added per frame: the
// bytes of a batch are the endpoint's count that Wakeup moves to the counters anyway, and the
// clock is read once per Wakeup that published new frames.

// batchMark is one batch as the source published it: the submit head after it with the bytes
// submitted up to it (mod 2^32: a queue never holds 4 GiB), and when it was published.
type batchMark struct {
	headBytes atomic.Uint64 // head | bytes<<32
	at        atomic.Int64  // ns since the stream opened
}

// batchMarks is a source's ring of batch marks. Each batch holds at least one frame, so a
// ring of twice the queue's entries covers every frame the submit queue can hold together
// with the mark before the oldest, which says where that batch began.
type batchMarks struct {
	ring    []batchMark
	n       atomic.Uint64 // marks written, stored after the mark
	epoch   time.Time
	written uint64 // n, privately
	head    uint32 // submit head at the last mark
	bytes   uint32 // bytes submitted up to it
}

func newBatchMarks(queueSize int) batchMarks {
	return batchMarks{ring: make([]batchMark, 2*queueSize), epoch: time.Now()}
}

// put records a batch of batchBytes that moved the submit head to head.
func (m *batchMarks) put(head uint32, batchBytes uint64) {
	m.head = head
	m.bytes += uint32(batchBytes)
	k := m.written
	e := &m.ring[k&uint64(len(m.ring)-1)]
	e.headBytes.Store(uint64(head) | uint64(m.bytes)<<32)
	e.at.Store(int64(time.Since(m.epoch)))
	m.written = k + 1
	m.n.Store(k + 1)
}

// get reads mark k; the mark before the first is the stream's start.
func (m *batchMarks) get(k int64) (head, bytes uint32, at int64) {
	if k < 0 {
		return 0, 0, 0
	}
	e := &m.ring[uint64(k)&uint64(len(m.ring)-1)]
	hb := e.headBytes.Load()
	return uint32(hb), uint32(hb >> 32), e.at.Load()
}

// depth is what waits in front of a sink whose tail is tail, in a queue of size entries. A
// tail that would put more than size frames in the queue is the peer's error: the queue
// counts as full. The bytes are exact when the tail stands at a batch's edge, and
// interpolated within the batch it stands in otherwise. A read the writer overtook (it wrote
// a whole ring of marks meanwhile) is tried again.
func (m *batchMarks) depth(tail, size uint32) netdev.Depth {
	for try := 0; ; try++ {
		n := int64(m.n.Load())
		if n == 0 {
			return netdev.Depth{}
		}
		lastHead, lastBytes, _ := m.get(n - 1)
		waiting := lastHead - tail
		if waiting == 0 || int32(waiting) < 0 {
			return netdev.Depth{}
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
		return netdev.Depth{
			Frames:  uint64(waiting),
			Bytes:   uint64(lastBytes - taken),
			Sojourn: max(0, time.Since(m.epoch)-time.Duration(at)),
		}
	}
}

// Queue reports what stands in the stream now; any goroutine may ask, while the stream is
// open. Submit is what the source published (up to its last Wakeup) and the sink has not
// taken: frames, bytes and the age of the oldest, from the batch it came in. Acks is what
// the sink acknowledged and the source has not collected, in frames only (the ack queue
// carries no times of ours, and the bytes are the peer's word).
func (s *Source) Queue() (submit, acks netdev.Depth) {
	submit = s.marks.depth(s.submit.ring.tail.Load(), s.submit.size)
	if n := s.ack.ring.head.Load() - s.ack.ring.tail.Load(); n <= s.ack.size {
		acks.Frames = uint64(n)
	}
	return submit, acks
}
