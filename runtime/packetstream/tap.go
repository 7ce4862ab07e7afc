package packetstream

import "sync/atomic"

// Tap sees a copy of every frame an endpoint passes while the tap is set: each frame a sink
// gets and each frame a source submits, in order. It is where a capture takes its copy, a
// wrapper around the stream rather than a step in any component's loop. Frame and Flush run on
// the endpoint's goroutine, Flush at the end of each batch (the endpoint's Wakeup); neither
// may block, and Frame must not keep frame.
type Tap interface {
	Frame(frame []byte)
	Flush()
}

// tapRef boxes a Tap for atomic.Pointer.
type tapRef struct{ t Tap }

// SetTap sets the endpoint's tap (nil: none) from any goroutine. The endpoint picks it up at
// its next Wakeup and from then on hands it every frame; the tap it had before gets its last
// Flush then. So without a tap an endpoint pays one atomic load per batch, and a nil check per
// frame.
func (e *endpoint) SetTap(t Tap) {
	if t == nil {
		e.tap.Store(nil)
		return
	}
	e.tap.Store(&tapRef{t})
}

// tapBatch ends a batch for the tap: the one in use flushes, the one set last takes over.
// Wakeup calls it only while there is a tap.
func (e *endpoint) tapBatch() {
	if e.tapping != nil {
		e.tapping.Flush()
	}
	if r := e.tap.Load(); r != nil {
		e.tapping = r.t
	} else {
		e.tapping = nil
	}
}

// tapState is the endpoint's part of tapping.
type tapState struct {
	tap     atomic.Pointer[tapRef] // set by SetTap, from any goroutine
	tapping Tap                    // the endpoint goroutine's copy of tap, as of its last Wakeup
}
