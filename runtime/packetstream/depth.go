package packetstream

import (
	"time"

	"github.com/nicstack/nicstack/netdev"
)

// The depth of a stream is computed when asked (status time), from any goroutine, from what
// the source records once per batch (netdev.Marks) and the sink's tail. Nothing is added per
// frame: the bytes of a batch are the endpoint's count that Wakeup moves to the counters
// anyway, and the clock is read once per Wakeup that published new frames.

// since is the source's clock for its marks: time since the stream opened.
func (s *Source) since() time.Duration { return time.Since(s.epoch) }

// Queue reports what stands in the stream now; any goroutine may ask, while the stream is
// open. Submit is what the source published (up to its last Wakeup) and the sink has not
// taken: frames, bytes and the age of the oldest, from the batch it came in. Acks is what
// the sink acknowledged and the source has not collected, in frames only (the ack queue
// carries no times of ours, and the bytes are the peer's word).
func (s *Source) Queue() (submit, acks netdev.Depth) {
	submit = s.marks.Depth(s.submit.ring.tail.Load(), s.submit.size, s.since())
	if n := s.ack.ring.head.Load() - s.ack.ring.tail.Load(); n <= s.ack.size {
		acks.Frames = uint64(n)
	}
	return submit, acks
}
