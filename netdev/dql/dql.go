// Package dql is a dynamic queue limit over bytes, Linux's byte queue limits
// (lib/dynamic_queue_limits.c) written anew: a limit on the bytes handed to a queue's
// consumer and not yet completed, learned from completions. ipxe_nic bounds its TX ring with
// one (tx_bql), nic_router the egress packet stream below its <fq-codel> scheduler.
package dql

import (
	"math"
	"time"
)

// Limit is a dynamic queue limit over bytes, the idea of Linux's byte queue limits
// (lib/dynamic_queue_limits.c): a limit on the bytes handed to the NIC and not yet completed,
// learned from completions, so that the TX ring holds what keeps the wire busy until the next
// completion and no more, and frames beyond it wait upstream, where a scheduler can order
// them. Each completion is one interval. The limit grows when the queue starved (the limit
// held frames back and the NIC then ran out of work before the completion came), by what the
// interval sent; it shrinks by the least slack (in flight beyond what the wire needed) seen
// over a hold time in which the queue stayed busy.
//
// The caller's event loop owns it (the driver's, the router's): no locks, no allocation; the
// clock is handed in. Totals
// run free in uint32 and are compared by difference, so they may wrap.
type Limit struct {
	min, max uint32
	hold     time.Duration

	limit     uint32
	queued    uint32 // bytes ever queued
	completed uint32 // bytes ever completed
	lastFrame uint32 // bytes of the last Queued

	// As they stood at the last completion.
	prevQueued    uint32
	prevOver      uint32 // bytes in flight beyond the limit
	prevLastFrame uint32

	lowestSlack uint32 // least slack since slackStart
	slackStart  time.Duration
}

// New makes a limit between min and max bytes (a max below min is min) that shrinks after
// hold, starting at min.
func New(min, max uint32, hold time.Duration, now time.Duration) Limit {
	q := Limit{min: min, hold: hold}
	q.SetMax(max)
	q.Reset(now)
	return q
}

// Reset forgets what is in flight and what was learned: the queue was reset at now.
func (q *Limit) Reset(now time.Duration) {
	*q = Limit{min: q.min, max: q.max, hold: q.hold, limit: q.min, lowestSlack: math.MaxUint32, slackStart: now}
}

// Queued counts a frame of bytes handed to the NIC.
func (q *Limit) Queued(bytes uint32) {
	q.queued += bytes
	q.lastFrame = bytes
}

// Avail is how many more bytes the limit admits, negative once in flight exceeds it: the
// driver hands the NIC another frame only while it is not negative, so in flight stays at most
// the limit plus one frame.
func (q *Limit) Avail() int {
	return int(q.limit) - int(q.InFlight())
}

// InFlight is the bytes queued and not yet completed.
func (q *Limit) InFlight() uint32 { return q.queued - q.completed }

// Limit is the limit in bytes.
func (q *Limit) Limit() uint32 { return q.limit }

// SetMax moves the upper bound, Linux's limit_max (sysfs byte_queue_limits/limit_max): the
// most the limit may cover however late completions come. A limit above it drops to it at
// once; bytes already in flight stay, and no more are admitted until they fall below it. A
// max below min is min.
func (q *Limit) SetMax(limitMax uint32) {
	q.max = max(limitMax, q.min)
	q.limit = min(q.limit, q.max)
}

// Capped is the upper bound of a limit whose own bound is natural under a limit_max setting:
// limitMax when it is set (not 0) and below natural.
func Capped(natural, limitMax uint32) uint32 {
	if limitMax == 0 {
		return natural
	}
	return min(natural, limitMax)
}

// Max is the upper bound.
func (q *Limit) Max() uint32 { return q.max }

// Completed counts bytes the NIC finished with at now and moves the limit. More bytes than
// are in flight is the caller's error (Linux's BUG_ON): they are clamped to what is in
// flight and ok is false.
func (q *Limit) Completed(bytes uint32, now time.Duration) (ok bool) {
	inFlight := q.InFlight()
	ok = bytes <= inFlight
	bytes = min(bytes, inFlight)
	done := q.completed + bytes
	over := posDiff(inFlight, q.limit)
	left := q.queued - done                      // still in flight after this completion
	prevLeft := q.prevQueued - q.completed       // of what was queued by the last one
	prevAllDone := int32(done-q.prevQueued) >= 0 // all that was queued by the last one is done
	limit := q.limit
	switch {
	case over > 0 && left == 0, q.prevOver > 0 && prevAllDone:
		// Starved: held back by the limit, then empty, here or possibly between the last
		// completion and the next queuing. Grow by what was both queued and completed
		// since the last completion, and by the excess then.
		limit += posDiff(done, q.prevQueued) + q.prevOver
		q.lowestSlack, q.slackStart = math.MaxUint32, now
	case left > 0 && prevLeft > 0 && !prevAllDone:
		// Busy the whole interval: in flight beyond twice what the interval completed is
		// slack, as is the part of the last frame the excess did not need.
		slack := posDiff(limit+q.prevOver, 2*bytes)
		if q.prevOver > 0 {
			slack = max(slack, posDiff(q.prevLastFrame, q.prevOver))
		}
		q.lowestSlack = min(q.lowestSlack, slack)
		if now-q.slackStart > q.hold {
			limit = posDiff(limit, q.lowestSlack)
			q.lowestSlack, q.slackStart = math.MaxUint32, now
		}
	}
	limit = min(max(limit, q.min), q.max)
	if limit != q.limit {
		q.limit = limit
		over = 0 // the excess was measured against the old limit
	}
	q.prevOver, q.prevLastFrame = over, q.lastFrame
	q.completed, q.prevQueued = done, q.queued
	return ok
}

// posDiff is a - b, or 0 when b is not less (by difference, so across a wrap).
func posDiff(a, b uint32) uint32 {
	if int32(a-b) > 0 {
		return a - b
	}
	return 0
}
