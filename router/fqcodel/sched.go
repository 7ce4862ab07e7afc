package fqcodel

import (
	"errors"
	"fmt"
	"math/rand/v2"
)

// Params are CoDel's (RFC 8289), for every flow queue.
type Params struct {
	Target   int64 // ns: the sojourn time CoDel keeps a queue at; default 5 ms
	Interval int64 // ns: how long above target before it drops, about a round trip; default 100 ms
	// MTU is the largest frame, bytes: while no more than that is queued CoDel does not drop,
	// as one frame at a time cannot be a standing queue. Default 1514.
	MTU int
	// ECN marks an ECN-capable frame CE instead of dropping it. New takes it as given (a
	// false is no zero to fill in); Defaults has it on.
	ECN bool
}

// Config is a Scheduler's.
type Config struct {
	Params
	Classes int // sessions queued apart, numbered 0..Classes-1
	Flows   int // flow buckets per class; default 1024
	Quantum int // bytes a class or flow may send a round (DRR); default 1514
	Limit   int // frames queued in all; at Limit+1 a batch is dropped from the fattest flow; default 10240
	Memory  int // bytes queued in all before the same; 0: no limit of bytes
	Batch   int // frames at most dropped at once from the fattest flow; default 64
	// Seed perturbs the flow hash, so that no one can aim flows at one bucket; 0: random.
	Seed uint64
}

// Defaults are fq_codel's as Linux has them, for one class.
var Defaults = Config{
	Params:  Params{Target: 5e6, Interval: 100e6, MTU: 1514, ECN: true},
	Classes: 1, Flows: 1024, Quantum: 1514, Limit: 10240, Batch: 64,
}

// Frame is one frame the scheduler hands back.
type Frame struct {
	Handle uint64
	Len    int
	// CE: CoDel chose to mark this ECN-capable frame; the caller sets CE in it (MarkCE)
	// before it sends it.
	CE bool
}

// Stats count what the scheduler did.
type Stats struct {
	Dropped   uint64 // by CoDel
	Marked    uint64 // CE by CoDel
	Overlimit uint64 // dropped because Limit or Memory was exceeded
	NewFlows  uint64 // flows that became active (went on the new list)
}

const nilIdx = -1

// entry is a queued frame.
type entry struct {
	handle uint64
	time   int64 // enqueued, the caller's ns
	len    int32
	ect    bool
	next   int32 // in its flow's FIFO, or the free list
}

// Which list a class or flow is on.
const (
	onNone uint8 = iota
	onNew
	onOld
)

// list is an intrusive singly linked FIFO of indices into a slice of flows or of classes;
// only its head leaves it.
type list struct{ head, tail int32 }

// linked is a flow or a class: what a list links.
type linked[T any] interface {
	*T
	link() *int32
}

func (f *flow) link() *int32  { return &f.next }
func (c *class) link() *int32 { return &c.next }

func push[T any, P linked[T]](l *list, items []T, i int32) {
	*P(&items[i]).link() = nilIdx
	if l.tail == nilIdx {
		l.head = i
	} else {
		*P(&items[l.tail]).link() = i
	}
	l.tail = i
}

// pop takes the head off l, which is not empty.
func pop[T any, P linked[T]](l *list, items []T) {
	i := l.head
	l.head = *P(&items[i]).link()
	if l.head == nilIdx {
		l.tail = nilIdx
	}
}

type flow struct {
	head, tail int32 // entries
	next       int32 // in its class's new or old list
	on         uint8
	deficit    int32
	backlog    int // bytes
	cd         codel
}

type class struct {
	flows      []flow // the class's buckets
	newF, oldF list
	next       int32 // in the scheduler's new or old list
	on         uint8
	deficit    int32
	backlog    int // bytes
	packets    int
}

// Scheduler is the egress queue of one interface.
type Scheduler struct {
	cfg        Config
	seed       uint64
	classes    []class
	entries    []entry
	free       int32
	newC, oldC list
	backlog    int // bytes, all classes
	packets    int
	stats      Stats
	// fat is the class dropFattest last dropped from; its next scan starts after it.
	fat int
}

// New makes a scheduler with its Limit+1 entries; a class's table of Flows flows is allocated
// at its first frame (flowsOf). Zero fields of cfg take Defaults'.
func New(cfg Config) (*Scheduler, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.Classes, Defaults.Classes)
	def(&cfg.Flows, Defaults.Flows)
	def(&cfg.Quantum, Defaults.Quantum)
	def(&cfg.Limit, Defaults.Limit)
	def(&cfg.Batch, Defaults.Batch)
	def(&cfg.MTU, Defaults.MTU)
	if cfg.Target == 0 {
		cfg.Target = Defaults.Target
	}
	if cfg.Interval == 0 {
		cfg.Interval = Defaults.Interval
	}
	switch {
	case cfg.Classes < 0 || cfg.Flows < 0 || cfg.Quantum < 0 || cfg.Limit < 0 || cfg.Batch < 0 || cfg.MTU < 0 || cfg.Memory < 0:
		return nil, errors.New("fqcodel: negative size")
	case cfg.Target < 0 || cfg.Interval < 0:
		return nil, errors.New("fqcodel: negative time")
	case cfg.Flows > 1<<16:
		return nil, fmt.Errorf("fqcodel: %d flows per class, at most 65536", cfg.Flows)
	case cfg.Limit >= 1<<30:
		return nil, fmt.Errorf("fqcodel: limit %d too large", cfg.Limit)
	case cfg.Quantum >= 1<<30:
		return nil, fmt.Errorf("fqcodel: quantum %d too large", cfg.Quantum)
	}
	s := &Scheduler{cfg: cfg, seed: cfg.Seed}
	if s.seed == 0 {
		s.seed = rand.Uint64() | 1
	}
	s.cfg.Classes = 0
	s.Grow(cfg.Classes)
	s.newC, s.oldC = list{nilIdx, nilIdx}, list{nilIdx, nilIdx}
	// One more than Limit: a frame is queued first, then a batch dropped if over.
	s.entries = make([]entry, cfg.Limit+1)
	for i := range s.entries {
		s.entries[i].next = int32(i + 1)
	}
	s.entries[len(s.entries)-1].next = nilIdx
	return s, nil
}

// Grow adds classes till there are n, without their flow tables; it allocates, so the caller
// does it when a session comes, not per frame.
func (s *Scheduler) Grow(n int) {
	for len(s.classes) < n {
		s.classes = append(s.classes, class{newF: list{nilIdx, nilIdx}, oldF: list{nilIdx, nilIdx}, next: nilIdx})
	}
	s.cfg.Classes = len(s.classes)
}

// flowsOf is class c's flow table, allocated at the class's first frame: of the classes of
// every session, only those that send through this interface need one (at nic_router's
// uplink every guest's; at a guest's interface the uplink's), and a table is Flows flows of
// 64 bytes. The class keeps it, for the next session that takes the class too, so a class
// allocates once in the scheduler's life, not per frame.
func (s *Scheduler) flowsOf(c *class) []flow {
	if c.flows == nil {
		c.flows = make([]flow, s.cfg.Flows)
		for i := range c.flows {
			c.flows[i] = flow{head: nilIdx, tail: nilIdx, next: nilIdx}
		}
	}
	return c.flows
}

// DropClass drops every frame of class c, appending their handles to dropped (Stats do not
// count them): its session went away, and the frames with it. The class stays, empty, for
// the next session to use.
func (s *Scheduler) DropClass(c int, dropped []uint64) []uint64 {
	cl := &s.classes[c]
	for i := range cl.flows {
		f := &cl.flows[i]
		for f.head != nilIdx {
			dropped = append(dropped, s.pop(cl, f).handle)
		}
		f.cd = codel{}
	}
	return dropped
}

// Config is the scheduler's configuration, defaults filled in.
func (s *Scheduler) Config() Config { return s.cfg }

// Stats are the counts so far.
func (s *Scheduler) Stats() Stats { return s.stats }

// Len is the number of frames queued, and Backlog their bytes.
func (s *Scheduler) Len() int     { return s.packets }
func (s *Scheduler) Backlog() int { return s.backlog }

// Oldest is when the oldest frame queued was enqueued (the caller's clock), false when none
// is: the earliest of the flows' heads, as each flow is a FIFO. It walks the active classes'
// flow lists, so it costs a look at each flow with frames, nothing per frame; the caller asks
// once a batch, not per frame.
func (s *Scheduler) Oldest() (int64, bool) {
	var at int64
	found := false
	for _, l := range [2]*list{&s.newC, &s.oldC} {
		for ci := l.head; ci != nilIdx; ci = s.classes[ci].next {
			c := &s.classes[ci]
			for _, fl := range [2]*list{&c.newF, &c.oldF} {
				for fi := fl.head; fi != nilIdx; fi = c.flows[fi].next {
					if h := c.flows[fi].head; h != nilIdx && (!found || s.entries[h].time < at) {
						at, found = s.entries[h].time, true
					}
				}
			}
		}
	}
	return at, found
}

// ClassLen is the number of frames queued in class c.
func (s *Scheduler) ClassLen(c int) int { return s.classes[c].packets }

// Enqueue queues the frame h of length bytes (not negative) at now under class cls
// (0..Classes-1) and the flow of key; ect says it is ECN-capable (ECT(0), ECT(1) or already
// CE: see Classify). When that takes the queue over its limit, a batch of frames is dropped
// from the head of the fattest flow of the fattest class and their handles are appended to
// dropped; queued is false when h itself was among them.
func (s *Scheduler) Enqueue(h uint64, length int, key *Key, cls int, ect bool, now int64, dropped []uint64) (queued bool, _ []uint64) {
	c := &s.classes[cls]
	fi := int32(s.bucket(key))
	f := &s.flowsOf(c)[fi]
	ei := s.free
	s.free = s.entries[ei].next
	s.entries[ei] = entry{handle: h, time: now, len: int32(length), ect: ect, next: nilIdx}
	if f.tail == nilIdx {
		f.head = ei
	} else {
		s.entries[f.tail].next = ei
	}
	f.tail = ei
	f.backlog += length
	c.backlog += length
	c.packets++
	s.backlog += length
	s.packets++
	if f.on == onNone {
		push(&c.newF, c.flows, fi)
		f.on, f.deficit = onNew, int32(s.cfg.Quantum)
		s.stats.NewFlows++
	}
	if c.on == onNone {
		push(&s.newC, s.classes, int32(cls))
		c.on, c.deficit = onNew, int32(s.cfg.Quantum)
	}
	if s.packets <= s.cfg.Limit && (s.cfg.Memory == 0 || s.backlog <= s.cfg.Memory) {
		return true, dropped
	}
	n := len(dropped)
	dropped = s.dropFattest(dropped)
	for _, d := range dropped[n:] {
		if d == h {
			return false, dropped
		}
	}
	return true, dropped
}

// dropFattest drops from the head of the flow with the largest backlog in the class with the
// largest backlog until half that flow's backlog or Batch frames are gone (at least one), as
// Linux's fq_codel does: one scan for many drops, and the flow that built the queue pays.
func (s *Scheduler) dropFattest(dropped []uint64) []uint64 {
	// The first of the largest that holds a frame (frames of length 0 must not leave the
	// choice on an empty one), scanning from the class after the last one dropped from:
	// classes of equal backlog are common (sessions of full-sized frames), and a scan from
	// class 0 would always drop from the lowest-numbered session of them, the first guest
	// to attach, so that the last took twice the others' share. Linux's flows are hash
	// buckets, which its scan from bucket 0 favours at random; classes are numbered in order.
	ci := -1
	for k := 1; k <= len(s.classes); k++ {
		i := (s.fat + k) % len(s.classes)
		if c := &s.classes[i]; c.packets > 0 && (ci < 0 || c.backlog > s.classes[ci].backlog) {
			ci = i
		}
	}
	s.fat = ci
	c := &s.classes[ci]
	fi := -1
	for i := range c.flows {
		if f := &c.flows[i]; f.head != nilIdx && (fi < 0 || f.backlog > c.flows[fi].backlog) {
			fi = i
		}
	}
	f := &c.flows[fi]
	threshold := f.backlog / 2
	gone := 0
	for i := 0; f.head != nilIdx; {
		e := s.pop(c, f)
		dropped = append(dropped, e.handle)
		s.stats.Overlimit++
		gone += int(e.len)
		if i++; i >= s.cfg.Batch || gone >= threshold {
			break
		}
	}
	return dropped
}

// pop takes the head frame off flow f of class c, freeing its entry.
func (s *Scheduler) pop(c *class, f *flow) entry {
	ei := f.head
	e := s.entries[ei]
	f.head = e.next
	if f.head == nilIdx {
		f.tail = nilIdx
	}
	s.entries[ei].next = s.free
	s.free = ei
	l := int(e.len)
	f.backlog -= l
	c.backlog -= l
	c.packets--
	s.backlog -= l
	s.packets--
	return e
}

// Dequeue takes the next frame to send at now, or false when none is queued. Frames CoDel
// drops on the way are appended to dropped.
func (s *Scheduler) Dequeue(now int64, dropped []uint64) (Frame, bool, []uint64) {
	for {
		head := &s.newC
		if head.head == nilIdx {
			head = &s.oldC
			if head.head == nilIdx {
				return Frame{}, false, dropped
			}
		}
		ci := head.head
		c := &s.classes[ci]
		if c.deficit <= 0 {
			c.deficit += int32(s.cfg.Quantum)
			pop(head, s.classes)
			push(&s.oldC, s.classes, ci)
			c.on = onOld
			continue
		}
		var fr Frame
		var ok bool
		fr, ok, dropped = s.dequeueClass(c, now, dropped)
		if !ok {
			pop(head, s.classes)
			// As fq_codel does for a flow: an emptied new class takes a turn on the old
			// list, unless that is empty (there is no one to starve).
			if head == &s.newC && s.oldC.head != nilIdx {
				push(&s.oldC, s.classes, ci)
				c.on = onOld
			} else {
				c.on = onNone
			}
			continue
		}
		c.deficit -= int32(fr.Len)
		return fr, true, dropped
	}
}

// dequeueClass is fq_codel's dequeue (RFC 8290 §4.2) over the flows of class c.
func (s *Scheduler) dequeueClass(c *class, now int64, dropped []uint64) (Frame, bool, []uint64) {
	for {
		head := &c.newF
		if head.head == nilIdx {
			head = &c.oldF
			if head.head == nilIdx {
				return Frame{}, false, dropped
			}
		}
		fi := head.head
		f := &c.flows[fi]
		if f.deficit <= 0 {
			f.deficit += int32(s.cfg.Quantum)
			pop(head, c.flows)
			push(&c.oldF, c.flows, fi)
			f.on = onOld
			continue
		}
		var fr Frame
		var ok bool
		fr, ok, dropped = s.codelDequeue(c, f, now, dropped)
		if !ok {
			pop(head, c.flows)
			// An emptied new flow goes to the end of the old list, so that a flow cannot
			// stay new (and first) by sending one frame at a time; Linux removes it instead
			// when no old flow waits, which starves no one and lets it be new again.
			if head == &c.newF && c.oldF.head != nilIdx {
				push(&c.oldF, c.flows, fi)
				f.on = onOld
			} else {
				f.on = onNone
			}
			continue
		}
		f.deficit -= int32(fr.Len)
		return fr, true, dropped
	}
}

// codelDequeue is CoDel's dequeue (RFC 8289 §5.5) on flow f, with Linux's ECN marking: an
// ECN-capable frame CoDel would drop is marked CE and sent instead, and counts as a drop for
// the control law.
func (s *Scheduler) codelDequeue(c *class, f *flow, now int64, dropped []uint64) (Frame, bool, []uint64) {
	p := &s.cfg.Params
	v := &f.cd
	if f.head == nilIdx {
		v.okToDrop(p, nil, s.backlog, now)
		v.dropping = false
		return Frame{}, false, dropped
	}
	e := s.pop(c, f)
	drop := v.okToDrop(p, &e, s.backlog, now)
	ce := false
	switch {
	case v.dropping && !drop:
		v.dropping = false
	case v.dropping:
		for v.dropping && now >= v.dropNext {
			v.count++
			if p.ECN && e.ect {
				ce = true
				s.stats.Marked++
				v.dropNext = controlLaw(v.dropNext, p.Interval, v.count)
				break
			}
			dropped = append(dropped, e.handle)
			s.stats.Dropped++
			if f.head == nilIdx {
				v.okToDrop(p, nil, s.backlog, now)
				v.dropping = false
				return Frame{}, false, dropped
			}
			e = s.pop(c, f)
			if !v.okToDrop(p, &e, s.backlog, now) {
				v.dropping = false
			} else {
				v.dropNext = controlLaw(v.dropNext, p.Interval, v.count)
			}
		}
	case drop:
		if p.ECN && e.ect {
			ce = true
			s.stats.Marked++
		} else {
			dropped = append(dropped, e.handle)
			s.stats.Dropped++
			if f.head == nilIdx {
				v.okToDrop(p, nil, s.backlog, now)
				v.enterDropping(p, now)
				return Frame{}, false, dropped
			}
			e = s.pop(c, f)
			v.okToDrop(p, &e, s.backlog, now)
		}
		v.enterDropping(p, now)
	}
	return Frame{Handle: e.handle, Len: int(e.len), CE: ce}, true, dropped
}
