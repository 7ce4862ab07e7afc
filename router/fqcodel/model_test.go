package fqcodel

import (
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// The reference model: per-flow FIFOs in plain slices and RFC 8290's scheduling rules
// written out again, at two levels (classes, then flows), with the over-limit drop from the
// fattest flow of the fattest class, and CoDel per flow as RFC 8289's pseudocode has it
// (first_above_time 0 for unset: the test's clock starts above 0), with Linux's ECN marking.

type mpkt struct {
	h       uint64
	len     int
	t       int64
	ect, ce bool
}

type mflow struct {
	q       []mpkt
	deficit int
	on      uint8
	// RFC 8289's variables
	firstAboveTime, dropNext int64
	count, lastCount         uint32
	dropping                 bool
}

type mclass struct {
	flows      []mflow
	newF, oldF []int
	deficit    int
	on         uint8
}

type model struct {
	quantum, limit, batch int
	classes               []mclass
	newC, oldC            []int
	p                     Params
	now                   int64
	dropped               []uint64 // by CoDel in the current dequeue
	fat                   int      // the class last dropped from for the limit
}

func (m *model) packets() (n int) {
	for _, c := range m.classes {
		n += c.packets()
	}
	return n
}

// oldest is the earliest enqueue time of a frame queued, 0 when none is.
func (m *model) oldest() (t int64) {
	for _, c := range m.classes {
		for _, f := range c.flows {
			if len(f.q) > 0 && (t == 0 || f.q[0].t < t) {
				t = f.q[0].t
			}
		}
	}
	return t
}

func (c *mclass) packets() (n int) {
	for _, f := range c.flows {
		n += len(f.q)
	}
	return n
}

func (c *mclass) bytes() (n int) {
	for _, f := range c.flows {
		n += f.bytes()
	}
	return n
}

func (f *mflow) bytes() (n int) {
	for _, p := range f.q {
		n += p.len
	}
	return n
}

func (m *model) enqueue(h uint64, length, ci, fi int, ect bool) (bool, []uint64) {
	c := &m.classes[ci]
	f := &c.flows[fi]
	f.q = append(f.q, mpkt{h: h, len: length, t: m.now, ect: ect})
	if f.on == onNone {
		c.newF = append(c.newF, fi)
		f.on, f.deficit = onNew, m.quantum
	}
	if c.on == onNone {
		m.newC = append(m.newC, ci)
		c.on, c.deficit = onNew, m.quantum
	}
	if m.packets() <= m.limit {
		return true, nil
	}
	fat := -1 // the first of the largest from the class after the last one dropped from
	for k := 1; k <= len(m.classes); k++ {
		i := (m.fat + k) % len(m.classes)
		if m.classes[i].packets() > 0 && (fat < 0 || m.classes[i].bytes() > m.classes[fat].bytes()) {
			fat = i
		}
	}
	m.fat = fat
	fc := &m.classes[fat]
	ff := 0
	for i := range fc.flows {
		if fc.flows[i].bytes() > fc.flows[ff].bytes() {
			ff = i
		}
	}
	victim := &fc.flows[ff]
	threshold, gone := victim.bytes()/2, 0
	var dropped []uint64
	queued := true
	for len(victim.q) > 0 {
		p := victim.q[0]
		victim.q = victim.q[1:]
		dropped = append(dropped, p.h)
		queued = queued && p.h != h
		gone += p.len
		if len(dropped) >= m.batch || gone >= threshold {
			break
		}
	}
	return queued, dropped
}

func (m *model) dequeue() (mpkt, bool) {
	for {
		isNew := len(m.newC) > 0
		lst := &m.oldC
		if isNew {
			lst = &m.newC
		} else if len(m.oldC) == 0 {
			return mpkt{}, false
		}
		ci := (*lst)[0]
		c := &m.classes[ci]
		if c.deficit <= 0 {
			c.deficit += m.quantum
			*lst = (*lst)[1:]
			m.oldC = append(m.oldC, ci)
			c.on = onOld
			continue
		}
		p, ok := m.dequeueClass(c)
		if !ok {
			*lst = (*lst)[1:]
			if isNew && len(m.oldC) > 0 {
				m.oldC = append(m.oldC, ci)
				c.on = onOld
			} else {
				c.on = onNone
			}
			continue
		}
		c.deficit -= p.len
		return p, true
	}
}

func (m *model) dequeueClass(c *mclass) (mpkt, bool) {
	for {
		isNew := len(c.newF) > 0
		lst := &c.oldF
		if isNew {
			lst = &c.newF
		} else if len(c.oldF) == 0 {
			return mpkt{}, false
		}
		fi := (*lst)[0]
		f := &c.flows[fi]
		if f.deficit <= 0 {
			f.deficit += m.quantum
			*lst = (*lst)[1:]
			c.oldF = append(c.oldF, fi)
			f.on = onOld
			continue
		}
		p, ok := m.codelDequeue(f)
		if !ok {
			*lst = (*lst)[1:]
			if isNew && len(c.oldF) > 0 {
				c.oldF = append(c.oldF, fi)
				f.on = onOld
			} else {
				f.on = onNone
			}
			continue
		}
		f.deficit -= p.len
		return p, true
	}
}

func (m *model) bytes() (n int) {
	for i := range m.classes {
		n += m.classes[i].bytes()
	}
	return n
}

// dodequeue is RFC 8289's.
func (m *model) dodequeue(f *mflow) (p mpkt, okToDrop, ok bool) {
	if len(f.q) == 0 {
		f.firstAboveTime = 0
		return mpkt{}, false, false
	}
	p = f.q[0]
	f.q = f.q[1:]
	sojourn := m.now - p.t
	if sojourn < m.p.Target || m.bytes() <= m.p.MTU {
		f.firstAboveTime = 0
	} else if f.firstAboveTime == 0 {
		f.firstAboveTime = m.now + m.p.Interval
	} else if m.now >= f.firstAboveTime {
		okToDrop = true
	}
	return p, okToDrop, true
}

func (m *model) law(t int64, count uint32) int64 {
	return t + int64(float64(m.p.Interval)/math.Sqrt(float64(count)))
}

// codelDequeue is RFC 8289's dequeue, marking instead of the drop where Linux does.
func (m *model) codelDequeue(f *mflow) (mpkt, bool) {
	p, okToDrop, ok := m.dodequeue(f)
	if !ok {
		f.dropping = false
		return p, false
	}
	if f.dropping {
		if !okToDrop {
			f.dropping = false
		}
		for m.now >= f.dropNext && f.dropping {
			f.count++
			if m.p.ECN && p.ect {
				p.ce = true
				f.dropNext = m.law(f.dropNext, f.count)
				return p, true
			}
			m.dropped = append(m.dropped, p.h)
			p, okToDrop, ok = m.dodequeue(f)
			if !okToDrop {
				f.dropping = false
			} else {
				f.dropNext = m.law(f.dropNext, f.count)
			}
		}
	} else if okToDrop {
		if m.p.ECN && p.ect {
			p.ce = true
		} else {
			m.dropped = append(m.dropped, p.h)
			p, _, ok = m.dodequeue(f)
		}
		f.dropping = true
		delta := f.count - f.lastCount
		f.count = 1
		if delta > 1 && m.now-f.dropNext < 16*m.p.Interval {
			f.count = delta
		}
		f.dropNext = m.law(m.now, f.count)
		f.lastCount = f.count
	}
	return p, ok
}

func TestMatchesModel(t *testing.T) {
	var drops, marks, runs int
	defer func() { t.Logf("CoDel dropped in %d of %d runs and marked in %d", drops, runs, marks) }()
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{
			Params: Params{
				Target: rapid.Int64Range(1, 5*ms).Draw(t, "target"),
				MTU:    rapid.IntRange(1, 3000).Draw(t, "mtu"),
				ECN:    rapid.Bool().Draw(t, "ecn"),
			},
			Classes: rapid.IntRange(1, 3).Draw(t, "classes"),
			Flows:   rapid.IntRange(1, 8).Draw(t, "flows"),
			Quantum: rapid.IntRange(1, 3000).Draw(t, "quantum"),
			Limit:   rapid.IntRange(1, 40).Draw(t, "limit"),
			Batch:   rapid.IntRange(1, 5).Draw(t, "batch"),
			Seed:    rapid.Uint64Min(1).Draw(t, "seed"),
		}
		if rapid.Bool().Draw(t, "memory") {
			cfg.Memory = rapid.IntRange(1, 20000).Draw(t, "memory limit")
		}
		cfg.Interval = rapid.Int64Range(cfg.Target, 20*ms).Draw(t, "interval")
		if rapid.Bool().Draw(t, "no codel") {
			cfg.Target, cfg.Interval = 1<<60, 1<<60 // the scheduling alone
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := &model{quantum: cfg.Quantum, limit: cfg.Limit, batch: cfg.Batch, classes: make([]mclass, cfg.Classes), p: cfg.Params}
		for i := range m.classes {
			m.classes[i].flows = make([]mflow, cfg.Flows)
		}
		var h uint64
		codelDrops, ceMarks := 0, 0
		now := int64(ms) // above 0: the model's first_above_time 0 means unset
		for range rapid.IntRange(1, 300).Draw(t, "steps") {
			now += rapid.Int64Range(0, ms).Draw(t, "dt")
			m.now = now
			switch op := rapid.IntRange(0, 19).Draw(t, "op"); {
			case op == 0: // a session goes
				ci := rapid.IntRange(0, len(m.classes)-1).Draw(t, "class")
				d := s.DropClass(ci, nil)
				var md []uint64
				for i := range m.classes[ci].flows {
					for _, p := range m.classes[ci].flows[i].q {
						md = append(md, p.h)
					}
					f := &m.classes[ci].flows[i]
					f.q, f.firstAboveTime, f.dropNext, f.count, f.lastCount, f.dropping = nil, 0, 0, 0, 0, false
				}
				if !slices.Equal(d, md) {
					t.Fatalf("drop class %d: %v, model %v", ci, d, md)
				}
			case op == 1 && len(m.classes) < 5: // a session comes
				s.Grow(len(m.classes) + 1)
				m.classes = append(m.classes, mclass{flows: make([]mflow, cfg.Flows)})
			case op < 13:
				h++
				var k Key
				k.SPort = uint16(rapid.IntRange(0, 5).Draw(t, "flow"))
				ci := rapid.IntRange(0, len(m.classes)-1).Draw(t, "class")
				length := rapid.IntRange(1, 1514).Draw(t, "len")
				ect := rapid.Bool().Draw(t, "ect")
				q, d := s.Enqueue(h, length, &k, ci, ect, now, nil)
				var mq bool
				var md []uint64
				if cfg.Memory == 0 {
					mq, md = m.enqueue(h, length, ci, s.bucket(&k), ect)
				} else {
					mq, md = m.enqueueMemory(h, length, ci, s.bucket(&k), ect, cfg.Memory)
				}
				if q != mq || !slices.Equal(d, md) {
					t.Fatalf("enqueue %d: queued %v dropped %v; model %v %v", h, q, d, mq, md)
				}
			default:
				f, ok, d := s.Dequeue(now, nil)
				m.dropped = nil
				p, mok := m.dequeue()
				if ok != mok || !slices.Equal(d, m.dropped) || f.Handle != p.h || f.Len != p.len || f.CE != p.ce {
					t.Fatalf("dequeue at %d: %+v %v dropped %v; model %+v %v dropped %v", now, f, ok, d, p, mok, m.dropped)
				}
				codelDrops += len(d)
				if f.CE {
					ceMarks++
				}
			}
			if s.Len() != m.packets() || s.Backlog() != m.bytes() {
				t.Fatalf("%d queued, %d bytes; model %d, %d", s.Len(), s.Backlog(), m.packets(), m.bytes())
			}
			if at, ok := s.Oldest(); ok != (m.packets() > 0) || ok && at != m.oldest() {
				t.Fatalf("oldest %d (%v), model %d", at, ok, m.oldest())
			}
			for i := range m.classes {
				if s.ClassLen(i) != m.classes[i].packets() || s.classes[i].backlog != m.classes[i].bytes() {
					t.Fatalf("class %d: %d frames %d bytes, model %d, %d", i, s.ClassLen(i), s.classes[i].backlog, m.classes[i].packets(), m.classes[i].bytes())
				}
			}
		}
		runs++
		if codelDrops > 0 {
			drops++
		}
		if ceMarks > 0 {
			marks++
		}
	})
}

// enqueueMemory is enqueue under a limit of bytes besides the limit of frames.
func (m *model) enqueueMemory(h uint64, length, ci, fi int, ect bool, memory int) (bool, []uint64) {
	limit := m.limit
	bytes := length
	for _, c := range m.classes {
		bytes += c.bytes()
	}
	if bytes > memory {
		m.limit = -1 // over: the batch drop runs whatever the count
	}
	q, d := m.enqueue(h, length, ci, fi, ect)
	m.limit = limit
	return q, d
}
