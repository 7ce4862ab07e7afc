package fqcodel

import "math"

// codel is the CoDel state of one flow queue (RFC 8289 §5).
type codel struct {
	// firstAbove is when the sojourn time, above target since then, will have been so for an
	// interval; above says whether it is set (the RFC's first_above_time != 0, which would
	// take the caller's clock value 0 for "unset").
	firstAbove int64
	above      bool
	dropping   bool
	dropNext   int64  // when to drop (or mark) next while dropping
	count      uint32 // drops and marks since entering the dropping state, as carried over
	lastCount  uint32 // count when the dropping state was last entered
}

// controlLaw is when the next drop falls after one at t: interval/sqrt(count) later.
func controlLaw(t, interval int64, count uint32) int64 {
	return t + int64(float64(interval)/math.Sqrt(float64(count)))
}

// okToDrop is the RFC's dodequeue test for the frame e just taken off the head (nil: the
// queue was empty): whether its sojourn time has been at or above target for at least an
// interval, with more than one maximum frame still queued (backlog, bytes).
func (v *codel) okToDrop(p *Params, e *entry, backlog int, now int64) bool {
	if e == nil {
		v.above = false
		return false
	}
	if now-e.time < p.Target || backlog <= p.MTU {
		v.above = false
		return false
	}
	if !v.above {
		v.firstAbove, v.above = now+p.Interval, true
		return false
	}
	return now >= v.firstAbove
}

// enterDropping starts a dropping state at now. When the last one ended recently (its next
// drop less than 16 intervals ago), its drop rate is a good start: count resumes at the
// drops it added, count - lastCount (RFC 8289 §5.6, as Linux does).
func (v *codel) enterDropping(p *Params, now int64) {
	v.dropping = true
	delta := v.count - v.lastCount
	v.count = 1
	if delta > 1 && now-v.dropNext < 16*p.Interval {
		v.count = delta
	}
	v.lastCount = v.count
	v.dropNext = controlLaw(now, p.Interval, v.count)
}
