// Package bql learns how many bytes may stand in a queue below a scheduler, as Linux's byte
// queue limits (lib/dynamic_queue_limits.c) do for a NIC's TX ring: enough that the consumer
// never runs dry while frames wait above it, and no more, so that the queue stands where the
// scheduler orders it.
//
// The producer reports the bytes it hands down (Queued) and may hand down more while Avail is
// not negative; the consumer's completions (Completed) move the limit: up when the queue ran
// dry while the producer was held back by the limit (starved), down by the least slack seen
// when bytes were left over at every completion for HoldTime. nic_router uses one per egress
// interface with fq-codel: the queue below it is the egress packet stream, the consumer the
// peer that acknowledges.
package bql

import "math"

// Limit is one queue's limit and what it learns from. The zero value is not usable; New.
type Limit struct {
	// Producer side.
	queued  uint64 // bytes handed down in all
	adj     uint64 // limit + completed: what queued may reach
	lastObj uint64 // bytes of the last frame handed down

	// Consumer side.
	limit           uint64
	completed       uint64 // bytes completed in all
	prevOver        uint64 // by how much queued was over the limit at the last completion
	prevQueued      uint64 // queued at the last completion
	prevLastObj     uint64
	lowestSlack     uint64
	slackStart      int64
	min, max        uint64
	holdTime        int64
	Starved, Shrunk uint64 // how often the limit grew or shrank, for tests and status
}

// New returns a limit between min and max bytes, starting at min, that shrinks after
// holdTime ns of slack (Linux: 1 s).
func New(min, max uint64, holdTime int64) *Limit {
	return &Limit{limit: min, adj: min, min: min, max: max, holdTime: holdTime, lowestSlack: math.MaxUint64}
}

// posdiff is a-b, or 0 when b is larger.
func posdiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}

// Queued records n bytes handed down.
func (l *Limit) Queued(n int) {
	l.lastObj = uint64(n)
	l.queued += uint64(n)
}

// Avail is how many more bytes may be handed down; the producer hands down another frame
// while it is not negative (so one frame may go over, as in Linux).
func (l *Limit) Avail() int64 { return int64(l.adj) - int64(l.queued) }

// Inflight is the bytes handed down and not completed.
func (l *Limit) Inflight() uint64 { return l.queued - l.completed }

// Value is the current limit, bytes.
func (l *Limit) Value() uint64 { return l.limit }

// Completed records n bytes the consumer finished at now (ns), and learns from it: Linux's
// dql_completed.
func (l *Limit) Completed(n uint64, now int64) {
	if l.slackStart == 0 {
		l.slackStart = now
	}
	queued := l.queued
	completed := l.completed + n
	if completed > queued {
		completed = queued // cannot complete what was not handed down
	}
	limit := l.limit
	over := posdiff(queued-l.completed, limit)
	inprogress := queued - completed
	prevInprogress := l.prevQueued - l.completed
	allPrevCompleted := completed >= l.prevQueued
	switch {
	case over > 0 && inprogress == 0 || l.prevOver > 0 && allPrevCompleted:
		// Starved: the consumer finished everything while the limit held the producer back
		// (or everything of the last time it did). Grow by what was held back.
		limit += posdiff(completed, l.prevQueued) + l.prevOver
		l.slackStart, l.lowestSlack = now, math.MaxUint64
		l.Starved++
	case inprogress > 0 && prevInprogress > 0 && !allPrevCompleted:
		// Bytes were left over at this completion: the slack is the limit's excess over twice
		// what completed since, at least the last frame's overshoot. Shrink by the least
		// slack once it persisted for holdTime.
		slack := posdiff(limit+l.prevOver, 2*(completed-l.completed))
		var lastObjs uint64
		if l.prevOver > 0 {
			lastObjs = posdiff(l.prevLastObj, l.prevOver)
		}
		slack = max(slack, lastObjs)
		l.lowestSlack = min(l.lowestSlack, slack)
		if now-l.slackStart > l.holdTime {
			limit = posdiff(limit, l.lowestSlack)
			l.slackStart, l.lowestSlack = now, math.MaxUint64
			l.Shrunk++
		}
	}
	limit = min(max(limit, l.min), l.max)
	l.limit = limit
	l.adj = limit + completed
	l.prevOver = over
	l.prevLastObj = l.lastObj
	l.completed = completed
	l.prevQueued = queued
}
