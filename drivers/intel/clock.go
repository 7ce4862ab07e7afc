package intel

import (
	"sync/atomic"
	"time"
)

// Clock is the model's sense of time: ITR spacing, auto-negotiation and wire pacing are
// measured on it, so tests can step it by hand.
type Clock interface {
	Now() time.Duration // monotonic, from an arbitrary origin
}

// monotonic is the real clock.
type monotonic struct{ start time.Time }

func (m monotonic) Now() time.Duration { return time.Since(m.start) }

// ManualClock is a clock that moves only when told to (tests).
type ManualClock struct{ t atomic.Int64 }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Duration { return time.Duration(c.t.Load()) }

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) { c.t.Add(int64(d)) }
