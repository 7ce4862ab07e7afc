package router

import (
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/dql"
	"github.com/nicstack/nicstack/router/fqcodel"
	"github.com/nicstack/nicstack/router/model"
)

// QueuePort is a Port whose egress buffer can hold frames the router queues: the interface
// of a domain with <fq-codel> (docs/isolation.md). A frame is copied once, into a buffer Hold
// allocates in the egress stream, rewritten there, and waits in the router's scheduler; it is
// submitted when the scheduler picks it and the bytes in flight to the peer are below what
// the interface's byte queue limit (netdev/dql) allows. A Port that is no QueuePort sends at
// once even in such a domain.
type QueuePort interface {
	Port
	// Hold allocates size bytes in the egress buffer for a frame that is not submitted yet;
	// id names it for SubmitHeld or Discard. False when the buffer has no room.
	Hold(size int) (id uint64, buf []byte, ok bool)
	// SubmitHeld submits the held buffer id, its first size bytes, with offload metadata.
	// False when the submit queue is full (the buffer stays held).
	SubmitHeld(id uint64, size int, off *netdev.Offload) bool
	// Discard frees a held buffer whose frame the scheduler dropped.
	Discard(id uint64)
	// Unacked is what was submitted and the peer has not acknowledged, as the port last
	// collected acknowledgements: frames and bytes.
	Unacked() (frames, bytes int)
	// Buffer is the most frames (submit queue entries or blocks, the fewer) and bytes the
	// egress buffer holds.
	Buffer() (frames, bytes int)
}

// bqlHoldTime is how long slack must persist before the byte queue limit shrinks (Linux's
// one second).
const bqlHoldTime = time.Second

// egress is the queue of an interface of a domain with <fq-codel>.
type egress struct {
	port QueuePort
	m    model.FQCodel
	mtu  int // CoDel's: the domain's mtu and the Ethernet header
	s    *fqcodel.Scheduler
	// slots are the frames queued, by the scheduler's handle; free lists the unused ones.
	slots []queuedFrame
	free  []int32
	// pending is the slot transmit filled, for submit (-1: none), and class its class.
	pending int32
	class   int
	dropped []uint64 // the scheduler's drops, scratch
	bql     dql.Limit
	// inflight is the most frames submitted and unacknowledged: a quarter of the buffer, the
	// scheduler's limit another quarter, so that held and in-flight frames never fill it.
	inflight int
	counted  fqcodel.Stats // what the interface's counters have of s's
}

type queuedFrame struct {
	id  uint64
	buf []byte
	off netdev.Offload
}

// routerClass is the scheduler class of frames the router makes itself; an interface's is
// its class field, from 1.
const routerClass = 0

// setEgress gives interface i the egress queue its domain asks for, or takes it away. A queue
// whose configuration did not change is kept with its frames; one that goes drops them.
func (r *Router) setEgress(i *Interface) {
	var m *model.FQCodel
	if i.dom != nil {
		m = i.dom.m.FQCodel
	}
	qp, ok := i.session.(QueuePort)
	if m == nil || !ok {
		r.dropEgress(i)
		return
	}
	mtu := i.dom.m.MTU + 14
	if i.eg != nil && i.eg.m == *m && i.eg.mtu == mtu {
		return
	}
	r.dropEgress(i)
	frames, bytes := qp.Buffer()
	limit := max(1, min(m.Limit, frames/4))
	memory := bytes / 4
	if m.MemoryLimit > 0 {
		memory = min(memory, m.MemoryLimit)
	}
	s, err := fqcodel.New(fqcodel.Config{
		Params:  fqcodel.Params{Target: int64(m.Target), Interval: int64(m.Interval), MTU: mtu, ECN: m.ECN},
		Classes: len(r.classes), Flows: m.Flows, Quantum: m.Quantum, Limit: limit, Memory: memory,
	})
	if err != nil { // model.Parse keeps every value in range
		r.log.Error("fq-codel", "interface", i.label, "error", err)
		return
	}
	e := &egress{port: qp, m: *m, mtu: mtu, s: s, slots: make([]queuedFrame, limit+1), free: make([]int32, limit+1),
		pending: -1, dropped: make([]uint64, 0, limit+1+fqcodel.Defaults.Batch),
		bql: dql.New(uint32(mtu), dql.Capped(uint32(max(mtu, bytes/4)), uint32(m.BQLLimitMax)), bqlHoldTime, time.Duration(r.nowNs)), inflight: max(1, frames/4)}
	for k := range e.free {
		e.free[k] = int32(len(e.free) - 1 - k)
	}
	i.eg = e
	r.egresses = append(r.egresses, i)
}

// dropEgress takes i's egress queue away, freeing the buffers of the frames it held.
func (r *Router) dropEgress(i *Interface) {
	e := i.eg
	if e == nil {
		return
	}
	for c := range r.classes {
		r.discard(i, e.s.DropClass(c, e.dropped[:0]), false)
	}
	r.countEgress(i)
	i.queued.publish(0, 0, 0)
	i.eg = nil
	for k, o := range r.egresses {
		if o == i {
			r.egresses = append(r.egresses[:k], r.egresses[k+1:]...)
			break
		}
	}
}

// takeClass gives interface i a scheduler class: the lowest free one, every egress queue
// growing its list of classes when it is new (which allocates: a session comes).
func (r *Router) takeClass(i *Interface) {
	for c := 1; c < len(r.classes); c++ {
		if r.classes[c] == nil {
			r.classes[c], i.class = i, c
			return
		}
	}
	i.class = len(r.classes)
	r.classes = append(r.classes, i)
	for _, o := range r.egresses {
		o.eg.s.Grow(len(r.classes))
	}
}

// freeClass gives i's class back: the frames it has queued anywhere are dropped, so that the
// next session to take it starts with none.
func (r *Router) freeClass(i *Interface) {
	for _, o := range r.egresses {
		r.discard(o, o.eg.s.DropClass(i.class, o.eg.dropped[:0]), false)
		r.countEgress(o)
	}
	r.classes[i.class] = nil
}

// transmitQueued is transmit for an interface with an egress queue: a buffer held in its
// egress stream, for submit to queue.
func (r *Router) transmitQueued(i *Interface, frame []byte) []byte {
	e := i.eg
	if !i.up || len(e.free) == 0 {
		r.full(i)
		return nil
	}
	id, buf, ok := e.port.Hold(len(frame))
	if !ok || len(buf) < len(frame) {
		if ok {
			e.port.Discard(id)
		}
		r.full(i)
		return nil
	}
	buf = buf[:len(frame)]
	copy(buf, frame)
	slot := e.free[len(e.free)-1]
	e.free = e.free[:len(e.free)-1]
	e.slots[slot] = queuedFrame{id: id}
	e.pending = slot
	e.class = routerClass
	if r.ingress != nil {
		e.class = r.ingress.class
	}
	return buf
}

// enqueue is submit for an interface with an egress queue: the frame transmitQueued held
// waits in the scheduler, under the session it came from and its flow.
func (r *Router) enqueue(i *Interface, buf []byte, off *netdev.Offload) {
	e := i.eg
	slot := e.pending
	e.pending = -1
	q := &e.slots[slot]
	q.buf, q.off = buf, *off
	key, ect := fqcodel.Classify(buf)
	var queued bool
	queued, e.dropped = e.s.Enqueue(uint64(slot), len(buf), &key, e.class, ect, r.nowNs, e.dropped[:0])
	r.discard(i, e.dropped, true)
	_ = queued // when it was among the dropped, discard freed it
}

// discard frees the buffers of frames the scheduler dropped from i's queue; counted says
// they count as drops (the scheduler's own, not a queue or session that went).
func (r *Router) discard(i *Interface, dropped []uint64, counted bool) {
	e := i.eg
	for _, h := range dropped {
		e.port.Discard(e.slots[h].id)
		e.slots[h] = queuedFrame{}
		e.free = append(e.free, int32(h))
	}
	if counted && len(dropped) > 0 {
		r.touchInterface(i)
	}
}

// service sends what i's scheduler picks while the byte queue limit allows, after learning
// from what the peer acknowledged since the last time. It runs at the end of every batch
// (Flush) and at Tick: acknowledgements wake the component's loop, which then flushes.
func (r *Router) service(i *Interface) {
	e := i.eg
	frames, bytes := e.port.Unacked()
	if done := e.bql.InFlight() - min(e.bql.InFlight(), uint32(bytes)); done > 0 || frames == 0 {
		e.bql.Completed(done, time.Duration(r.nowNs))
	}
	for e.s.Len() > 0 && e.bql.Avail() >= 0 && frames < e.inflight && i.up {
		var fr fqcodel.Frame
		var ok bool
		fr, ok, e.dropped = e.s.Dequeue(r.nowNs, e.dropped[:0])
		r.discard(i, e.dropped, true)
		if !ok {
			break
		}
		q := &e.slots[fr.Handle]
		if fr.CE {
			fqcodel.MarkCE(q.buf)
		}
		n := len(q.buf)
		if !e.port.SubmitHeld(q.id, n, &q.off) { // Buffer's frames bound what is in flight: not expected
			e.dropped = append(e.dropped[:0], fr.Handle)
			r.discard(i, e.dropped, false)
			r.full(i)
			break
		}
		*q = queuedFrame{}
		e.free = append(e.free, int32(fr.Handle))
		e.bql.Queued(uint32(n))
		frames++
		r.sent(i, n)
	}
	r.countEgress(i)
}

// countEgress adds what i's scheduler dropped and marked since the last time to the
// counters, and publishes the queue's depth.
func (r *Router) countEgress(i *Interface) {
	e := i.eg
	st := e.s.Stats()
	d, m, o := st.Dropped-e.counted.Dropped, st.Marked-e.counted.Marked, st.Overlimit-e.counted.Overlimit
	e.counted = st
	i.stats.CoDelDropped.add(d)
	i.stats.CoDelMarked.add(m)
	i.stats.Overlimit.add(o)
	r.stats.CoDelDropped.add(d)
	r.stats.CoDelMarked.add(m)
	r.stats.Overlimit.add(o)
	since, _ := e.s.Oldest()
	i.queued.publish(e.s.Len(), e.s.Backlog(), since)
}

// serviceAll services every egress queue with frames waiting or in flight.
func (r *Router) serviceAll() {
	r.setNow()
	for _, i := range r.egresses {
		if e := i.eg; e.s.Len() > 0 || e.bql.InFlight() > 0 {
			r.service(i)
			r.touchInterface(i)
		}
	}
}

// Queued reports what waits in i's egress queue (<fq-codel>) at the end of the router's
// last batch: frames, bytes, and how long the oldest has waited at now. Any goroutine may
// ask; zero without a queue.
func (i *Interface) Queued(now time.Time) netdev.Depth { return i.queued.at(now) }
