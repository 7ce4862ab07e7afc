package ipxe

import (
	"sync/atomic"
	"time"
)

// Adaptive interrupt moderation (rx_irq_throttle="adaptive") in the spirit of e1000e's
// dynamic ITR: the driver watches what each interrupt carried over an interval and moves ITR
// between four latency classes. A fixed ITR must choose between latency (an interrupt per
// frame costs the driver a wakeup each) and CPU (a long interval holds every frame back, and
// TCP's acknowledgements with them); the classes give request/response traffic the first and
// streams the second, and a steady received stream whose frames leave the RX ring far from
// full the longest interval.

// Latency is a class of traffic and the ITR interval that serves it.
type Latency uint8

const (
	// LowestLatency: an idle line or request/response, a frame or two per interrupt. ITR
	// off: every frame is handled at once.
	LowestLatency Latency = iota
	// LowLatency: a few frames per interrupt. Genode's 166 µs, at most ~6000 interrupts/s.
	LowLatency
	// BulkLatency: streaming, many full frames per interrupt. 250 µs, at most ~4000
	// interrupts/s, e1000e's bulk rate. On the seed scenario (2-core VM, bench iperf
	// receiving) it kept 651's throughput at a little less driver CPU, while 1302-3906 lost
	// 10-18 % and 5580 5 % (Genode measured 5580 15 % slower on real hardware).
	BulkLatency
	// StreamLatency: a steady stream of full frames one way, Genode's 5580 (1.43 ms, at most
	// ~700 interrupts/s), the lowest rate of the fixed settings: only while an interrupt's
	// frames fill a small part of the RX ring. A full TX ring does not leave it: its
	// descriptors hold over four intervals of a 1 Gbit/s wire, and the interrupt after a
	// quarter of them went out resumes the backlog, so a sending guest that keeps it full
	// (TCP held back by the ring, not dropped) is a stream too. Not with tx_bql: the byte
	// limit learns how much the ring must hold to last from one completion to the next, and
	// at 1.43 ms between TX interrupts that is over 118 full frames of a 1 Gbit/s wire
	// standing in the ring, where bulk's 250 µs needs about 20; so with a TX byte limit only
	// received bytes make a stream (SetTXLimit). (At ~1 ms, 3906, the driver used 1.23-1.43 x
	// 5580's CPU.)
	StreamLatency
)

var latencyITR = [...]uint32{LowestLatency: 0, LowLatency: 651, BulkLatency: 977, StreamLatency: 5580}

// ITR is the class's interval in 256 ns units.
func (l Latency) ITR() uint32 { return latencyITR[l] }

func (l Latency) String() string { return [...]string{"lowest", "low", "bulk", "stream"}[l] }

// Classes is how many latency classes there are.
const Classes = int(StreamLatency) + 1

// ModerationInterval is how long the driver watches traffic before it judges it. ITR is
// written only at these boundaries (on real hardware each change is an MMIO write), and an
// interval holds several interrupts even at the bulk class's rate.
const ModerationInterval = 4 * time.Millisecond

// moderationConfirm is how many intervals in a row must ask for another class before ITR
// moves: one burst in a stream, or one pause in a request/response exchange, does not.
const moderationConfirm = 2

// What an interval's interrupts carried, on average, that moves ITR. The thresholds depend
// on the class in effect, whose ITR shaped the interval (a stream piles up more per interrupt
// the longer the interval), and traffic between a class's threshold to enter and the one to
// leave stays where it is (hysteresis).
const (
	fullFrame = 1514
	// The lowest class is for small frames (e1000e leaves it at 512 bytes per interrupt):
	// more than a full frame per interrupt leaves it, less than half a frame in a few small
	// frames returns to it.
	lowestLeave   = fullFrame
	lowestEnter   = fullFrame / 2
	smallExchange = 4 // frames per interrupt, both directions
	// Bulk from the lowest class: with ITR off, frames pile up only when the stream outpaces
	// the driver's round trip.
	bulkFromLowest = 8 * fullFrame
	// Bulk from the low class: at its ~6000 interrupts/s, 4 full frames are ~290 Mbit/s.
	bulkFromLow = 4 * fullFrame
	// Bulk is left below 2 full frames per interrupt: at its ~4000 interrupts/s, ~100 Mbit/s.
	bulkLeave = 2 * fullFrame
	// Stream from bulk: 8 full frames received or sent per interrupt (~390 Mbit/s at bulk's
	// rate), for streamConfirm intervals in a row.
	streamEnter   = 8 * fullFrame
	streamConfirm = 4
	// Stream is left for bulk below 4 full frames either way per interrupt (~50 Mbit/s at
	// its rate), and at once when a pass over the RX ring took more than ringFull frames
	// (Work.RXPass): a stream that grew, or a driver that ran late, comes close to filling
	// the ring (beyond it the NIC drops frames, a retransmit each). After such an exit the
	// stream class needs twice as many intervals to return, up to streamBackoff: a driver
	// that keeps running late does not swing between the two classes.
	streamLeave   = 4 * fullFrame
	ringFull      = RingSize * 3 / 4
	streamBackoff = 16
)

// Work is what the driver did between two interrupts, the interrupt's own pass over the RX
// ring included, and with rx_poll_on_tx the frames it took when it ran to transmit.
type Work struct {
	Frames, Bytes     uint64 // received, and sent since the interrupt before
	RXFrames, RXBytes uint64 // received only
	// RXPass is the most descriptors one pass over the RX ring took: how full the ring came,
	// which RXFrames no longer tells when passes between the interrupts took part of it.
	RXPass uint64
}

// classify is the class an interval's traffic asks for, given the class in effect; with
// txLimit, sent bytes do not make a stream.
func classify(cur Latency, irqs uint64, w Work, txLimit bool) Latency {
	if irqs == 0 || w.Frames == 0 {
		return LowestLatency
	}
	perIrq, framesPerIrq := w.Bytes/irqs, (w.Frames+irqs-1)/irqs
	oneWay := max(w.RXBytes, w.Bytes-w.RXBytes) / irqs
	if txLimit {
		oneWay = w.RXBytes / irqs
	}
	if cur == StreamLatency {
		if oneWay < streamLeave {
			return classify(BulkLatency, irqs, w, txLimit)
		}
		return StreamLatency
	}
	small := perIrq < lowestEnter && framesPerIrq <= smallExchange
	switch cur {
	case LowestLatency:
		switch {
		case perIrq >= bulkFromLowest:
			return BulkLatency
		case perIrq > lowestLeave || framesPerIrq > smallExchange:
			return LowLatency
		}
		return LowestLatency
	case LowLatency:
		switch {
		case perIrq >= bulkFromLow:
			return BulkLatency
		case small:
			return LowestLatency
		}
		return LowLatency
	}
	switch {
	case oneWay >= streamEnter:
		return StreamLatency
	case perIrq >= bulkLeave:
		return BulkLatency
	case small:
		return LowestLatency
	}
	return LowLatency
}

// Moderation chooses the latency class interval by interval. The driver feeds it every
// interrupt's work from its event loop; it is not safe for concurrent use.
type Moderation struct {
	class  Latency
	want   Latency // where the last intervals asked to go
	streak int     // how many intervals in a row asked to move that way
	// streamAfter is how many intervals in a row must ask for the stream class: more after
	// the ring came close to full in it.
	streamAfter int
	txLimit     bool // the TX ring has a byte limit: sent bytes make no stream

	start, last time.Duration // the interval began; the last interrupt
	irqs        uint64        // the interval's so far, and their work
	work        Work
	unpublished [Classes]time.Duration
	ms          [Classes]*atomic.Uint64 // time spent per class
	changes     *atomic.Uint64
}

// NewModeration starts in the lowest latency class at now, counting in cnt's ITR counters.
func NewModeration(now time.Duration, cnt *Counters) *Moderation {
	return &Moderation{start: now, last: now, streamAfter: streamConfirm,
		ms: [Classes]*atomic.Uint64{cnt.ITRLowestMS, cnt.ITRLowMS, cnt.ITRBulkMS, cnt.ITRStreamMS}, changes: cnt.ITRChanges}
}

// Class is the class in effect.
func (m *Moderation) Class() Latency { return m.class }

// SetTXLimit says whether the TX ring has a byte limit (tx_bql): then only received bytes
// make a stream, and a stream the sent bytes made is left at the next verdict.
func (m *Moderation) SetTXLimit(on bool) { m.txLimit = on }

// Interrupt accounts an interrupt at now and the work since the one before. At an interval
// boundary it judges the interval and says whether the class changed; the caller then
// writes the new class's ITR.
func (m *Moderation) Interrupt(now time.Duration, w Work) (class Latency, changed bool) {
	switch {
	case m.class == StreamLatency && w.RXPass > ringFull:
		// Not for an interval's verdict: the next interrupt may overflow the ring.
		m.close(now)
		changed = m.move(BulkLatency)
		m.streamAfter = min(2*m.streamAfter, streamBackoff)
	case now-m.last >= ModerationInterval && w.Bytes <= lowestLeave:
		// The line was quiet for a whole interval: whatever comes next is best served at
		// once, and nothing is left to throttle meanwhile. (A gap that ends in a pile of
		// frames was the driver's, not the line's: a loaded machine ran something else.)
		m.close(now)
		changed = m.move(LowestLatency)
		m.streamAfter = streamConfirm
	case now-m.start >= ModerationInterval:
		v := classify(m.class, m.irqs, m.work, m.txLimit)
		m.close(now)
		changed = m.vote(v)
	}
	m.last = now
	m.irqs++
	m.work.Frames += w.Frames
	m.work.Bytes += w.Bytes
	m.work.RXFrames += w.RXFrames
	m.work.RXBytes += w.RXBytes
	return m.class, changed
}

// close ends the interval at now, counting its time to the class in effect.
func (m *Moderation) close(now time.Duration) {
	m.unpublished[m.class] += now - m.start
	if whole := m.unpublished[m.class] / time.Millisecond; whole > 0 {
		m.ms[m.class].Add(uint64(whole))
		m.unpublished[m.class] -= whole * time.Millisecond
	}
	m.start, m.irqs, m.work = now, 0, Work{}
}

// vote counts an interval's verdict. Verdicts in a row that point the same way (up to more
// throttling or down to less) move the class once there are moderationConfirm of them
// (streamAfter to the stream class), to the nearest class any of them asked for.
func (m *Moderation) vote(v Latency) bool {
	switch {
	case v == m.class:
		m.streak = 0
		return false
	case m.streak > 0 && (v > m.class) == (m.want > m.class):
		m.streak++
		if v > m.class {
			m.want = min(m.want, v)
		} else {
			m.want = max(m.want, v)
		}
	default:
		m.want, m.streak = v, 1
	}
	if m.streak < moderationConfirm || m.want == StreamLatency && m.streak < m.streamAfter {
		return false
	}
	if m.class == StreamLatency {
		m.streamAfter = streamConfirm // the stream ended: the next one starts afresh
	}
	return m.move(m.want)
}

func (m *Moderation) move(to Latency) bool {
	m.streak = 0
	if to == m.class {
		return false
	}
	m.class = to
	m.changes.Add(1)
	return true
}
