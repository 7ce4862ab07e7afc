package packetstream

// AckSignal is the source as an Endpoint for a Waiter of another goroutine than the source's
// own: ready when the sink has acknowledgements the source has not collected, armed for the
// sink's ack signal. It reads only the ack queue's shared indices and sets only its armed
// flag, so it may be waited on while the source's goroutine uses the source (under the
// caller's lock, which the wait does not hold); the source must be in no other Waiter.
// intel_nic_hw's flow control waits on it for the far end to drain its receive stream while
// the device's goroutine, which transmits into that stream, is paused. A wakeup may be
// spurious (the source collected the acknowledgements meanwhile): callers look and wait again.
func (s *Source) AckSignal() Endpoint { return ackSignal{s} }

type ackSignal struct{ s *Source }

// ready: the sink's head is past the tail the source last published, and valid (a head more
// than a queue ahead is the peer's garbage: never ready, the caller's deadline ends the wait).
func (a ackSignal) ready() bool {
	q := &a.s.ack.ring
	n := q.head.Load() - q.tail.Load()
	return n != 0 && n <= q.size
}

func (a ackSignal) arm()            { a.s.ack.consArmed.Swap(1) }
func (a ackSignal) disarm()         { a.s.ack.consArmed.Store(0) }
func (a ackSignal) base() *endpoint { return a.s.endpoint }
