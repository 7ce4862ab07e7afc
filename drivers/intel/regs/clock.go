package regs

import (
	"sync/atomic"
	"time"
)

// Clock is the sense of time of the model and the driver: the model's ITR spacing,
// auto-negotiation and wire pacing and the driver's adaptive moderation are measured on it,
// so tests can step it by hand.
type Clock interface {
	Now() time.Duration // monotonic, from an arbitrary origin
}

// Monotonic is the real clock, counting from now.
func Monotonic() Clock { return monotonic{start: time.Now()} }

type monotonic struct{ start time.Time }

func (m monotonic) Now() time.Duration { return time.Since(m.start) }

// ManualClock is a clock that moves only when told to (tests).
type ManualClock struct{ t atomic.Int64 }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Duration { return time.Duration(c.t.Load()) }

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) { c.t.Add(int64(d)) }
