package guests

import (
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/dql"
	"github.com/nicstack/nicstack/router/fqcodel"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// qdisc is an embedded guest's egress with qdisc="fq_codel": the model of a Linux host's
// default qdisc (fq_codel on Debian) over a driver with byte queue limits, between the stack
// and the session's TX stream. A frame is copied once, into a buffer allocated in the stream
// and not submitted, and waits in the scheduler (router/fqcodel, Linux's defaults, one
// class); the scheduler's pick is submitted while the bytes the peer has not acknowledged
// stay within a limit learned from its acknowledgements (netdev/dql), as nic_router's egress
// does (router/egress.go). So the far end's backlog stands in the scheduler, where a sparse
// flow's frame passes a bulk flow's, and not in the stream, which the emulated NIC drains at
// the wire's pace in order. Frames beyond the scheduler's limit, or CoDel's, are dropped,
// as Linux drops them, and TCP recovers; the stack is never held back.
//
// The Port's mutex guards it: WriteFrames queues (enqueue), the Port's drain loop submits
// (service), and WriteFrames too while that loop is parked (port.go): a frame written to an
// idle qdisc goes out without waiting for another goroutine to wake.
type qdisc struct {
	out     *packetstream.Source
	s       *fqcodel.Scheduler
	bql     dql.Limit
	epoch   time.Time
	slots   []packetstream.Packet // the frames queued, by the scheduler's handle
	free    []int32
	dropped []uint64 // the scheduler's drops, scratch
	counted fqcodel.Stats
	// What the status reads from any goroutine: frames and bytes queued, drops and marks.
	frames, bytes  atomic.Uint64
	drops, marks   *atomic.Uint64
	noRoom         *atomic.Uint64 // frames the stream's buffer had no room for
	inflightFrames int            // the most frames submitted and unacknowledged
}

// qdiscCounters are where a qdisc counts: the guest's counters.
type qdiscCounters struct{ Dropped, Marked, NoRoom *atomic.Uint64 }

// newQdisc makes the egress of frames up to mtu bytes (Ethernet header included) into out.
// Half of the stream's buffer holds the scheduler's frames, half those in flight, so that
// the scheduler, not a full buffer, decides what is dropped. limitMax caps the byte limit
// (tx_bql_limit_max; 0: half the buffer), never below one frame.
func newQdisc(out *packetstream.Source, mtu int, limitMax uint32, cnt qdiscCounters) (*qdisc, error) {
	c := out.Config()
	frames := min(c.QueueSize, c.BulkSize/packetstream.BlockSize)
	limit := max(1, frames/2)
	cfg := fqcodel.Defaults
	cfg.MTU, cfg.Limit, cfg.Memory = mtu, limit, c.BulkSize/2
	s, err := fqcodel.New(cfg)
	if err != nil {
		return nil, err
	}
	q := &qdisc{out: out, s: s, epoch: time.Now(), slots: make([]packetstream.Packet, limit+1), free: make([]int32, limit+1),
		dropped: make([]uint64, 0, limit+1+cfg.Batch), drops: cnt.Dropped, marks: cnt.Marked, noRoom: cnt.NoRoom,
		inflightFrames: max(1, frames/2)}
	q.bql = dql.New(uint32(mtu), dql.Capped(uint32(max(mtu, c.BulkSize/2)), limitMax), time.Second, q.now())
	for k := range q.free {
		q.free[k] = int32(len(q.free) - 1 - k)
	}
	return q, nil
}

func (q *qdisc) now() time.Duration { return time.Since(q.epoch) }

// enqueue queues one frame; false when it was dropped at once (no slot, no room in the
// stream's buffer, or the scheduler's limit took it).
func (q *qdisc) enqueue(data []byte, off netdev.Offload) bool {
	if len(q.free) == 0 {
		q.noRoom.Add(1)
		return false
	}
	pk, err := q.out.Alloc(len(data))
	if err != nil {
		q.noRoom.Add(1)
		return false
	}
	buf := q.out.Payload(pk)
	copy(buf, data)
	if off != (netdev.Offload{}) {
		pk = pk.WithOffload(off)
	}
	slot := q.free[len(q.free)-1]
	q.free = q.free[:len(q.free)-1]
	q.slots[slot] = pk
	key, ect := fqcodel.Classify(buf)
	var queued bool
	queued, q.dropped = q.s.Enqueue(uint64(slot), len(data), &key, 0, ect, int64(q.now()), q.dropped[:0])
	q.discard()
	return queued
}

// discard frees the buffers of the frames the scheduler dropped.
func (q *qdisc) discard() {
	for _, h := range q.dropped {
		q.out.Release(q.slots[h])
		q.slots[h] = packetstream.Packet{}
		q.free = append(q.free, int32(h))
	}
}

// service learns what the peer acknowledged since the last time (releasing those buffers)
// and submits what the scheduler picks while the limit allows, in the scheduler's order, so
// a frame written while others wait goes after them; it says how many it submitted, and
// the caller wakes the peer if any.
func (q *qdisc) service() (submitted int) {
	now := q.now()
	before := q.out.InFlightBytes()
	q.out.ReleaseAcked()
	if done := before - q.out.InFlightBytes(); done > 0 {
		q.bql.Completed(uint32(done), now)
	}
	for q.s.Len() > 0 && q.bql.Avail() >= 0 && q.out.InFlight() < q.inflightFrames && q.out.CanSubmit() {
		var fr fqcodel.Frame
		var ok bool
		fr, ok, q.dropped = q.s.Dequeue(int64(now), q.dropped[:0])
		q.discard()
		if !ok {
			break
		}
		pk := q.slots[fr.Handle]
		if fr.CE {
			fqcodel.MarkCE(q.out.Payload(pk))
		}
		q.out.TrySubmit(pk) // CanSubmit above promised the room
		q.bql.Queued(pk.Size)
		q.slots[fr.Handle] = packetstream.Packet{}
		q.free = append(q.free, int32(fr.Handle))
		submitted++
	}
	q.publish()
	return submitted
}

// publish brings the counters and the depth the status reads in line with the scheduler.
func (q *qdisc) publish() {
	st := q.s.Stats()
	q.drops.Add(st.Dropped + st.Overlimit - q.counted.Dropped - q.counted.Overlimit)
	q.marks.Add(st.Marked - q.counted.Marked)
	q.counted = st
	q.frames.Store(uint64(q.s.Len()))
	q.bytes.Store(uint64(q.s.Backlog()))
}

// busy says that frames wait in the scheduler or in the stream: the drain loop has
// acknowledgements to wait for.
func (q *qdisc) busy() bool { return q.s.Len() > 0 || q.out.InFlight() > 0 }

// depth is what waits in the scheduler.
func (q *qdisc) depth() netdev.Depth {
	return netdev.Depth{Frames: q.frames.Load(), Bytes: q.bytes.Load()}
}
