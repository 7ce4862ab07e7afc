package fqcodel

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// The reference model: per-flow FIFOs in plain slices and RFC 8290's scheduling rules
// written out again, at two levels (classes, then flows), with the over-limit drop from the
// fattest flow of the fattest class. CoDel is out of it (a target no sojourn reaches): its
// transitions have tests of their own.

type mpkt struct {
	h   uint64
	len int
}

type mflow struct {
	q       []mpkt
	deficit int
	on      uint8
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
}

func (m *model) packets() (n int) {
	for _, c := range m.classes {
		n += c.packets()
	}
	return n
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

func (m *model) enqueue(h uint64, length, ci, fi int) (bool, []uint64) {
	c := &m.classes[ci]
	f := &c.flows[fi]
	f.q = append(f.q, mpkt{h, length})
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
	fat := 0
	for i := range m.classes {
		if m.classes[i].bytes() > m.classes[fat].bytes() {
			fat = i
		}
	}
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
		if len(f.q) == 0 {
			*lst = (*lst)[1:]
			if isNew && len(c.oldF) > 0 {
				c.oldF = append(c.oldF, fi)
				f.on = onOld
			} else {
				f.on = onNone
			}
			continue
		}
		p := f.q[0]
		f.q = f.q[1:]
		f.deficit -= p.len
		return p, true
	}
}

func TestMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{
			Params:  Params{Target: 1 << 60, Interval: 100 * ms, MTU: 1514},
			Classes: rapid.IntRange(1, 3).Draw(t, "classes"),
			Flows:   rapid.IntRange(1, 8).Draw(t, "flows"),
			Quantum: rapid.IntRange(1, 3000).Draw(t, "quantum"),
			Limit:   rapid.IntRange(1, 16).Draw(t, "limit"),
			Batch:   rapid.IntRange(1, 5).Draw(t, "batch"),
			Seed:    rapid.Uint64Min(1).Draw(t, "seed"),
		}
		if rapid.Bool().Draw(t, "memory") {
			cfg.Memory = rapid.IntRange(1, 20000).Draw(t, "memory limit")
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := &model{quantum: cfg.Quantum, limit: cfg.Limit, batch: cfg.Batch, classes: make([]mclass, cfg.Classes)}
		for i := range m.classes {
			m.classes[i].flows = make([]mflow, cfg.Flows)
		}
		var h uint64
		now := int64(0)
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			now += ms
			switch op := rapid.IntRange(0, 19).Draw(t, "op"); {
			case op == 0: // a session goes
				ci := rapid.IntRange(0, len(m.classes)-1).Draw(t, "class")
				d := s.DropClass(ci, nil)
				var md []uint64
				for i := range m.classes[ci].flows {
					for _, p := range m.classes[ci].flows[i].q {
						md = append(md, p.h)
					}
					m.classes[ci].flows[i].q = nil
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
				q, d := s.Enqueue(h, length, &k, ci, false, now, nil)
				var mq bool
				var md []uint64
				if cfg.Memory == 0 {
					mq, md = m.enqueue(h, length, ci, s.bucket(&k))
				} else {
					mq, md = m.enqueueMemory(h, length, ci, s.bucket(&k), cfg.Memory)
				}
				if q != mq || !slices.Equal(d, md) {
					t.Fatalf("enqueue %d: queued %v dropped %v; model %v %v", h, q, d, mq, md)
				}
			default:
				f, ok, d := s.Dequeue(now, nil)
				p, mok := m.dequeue()
				if ok != mok || len(d) != 0 || f.Handle != p.h || f.Len != p.len || f.CE {
					t.Fatalf("dequeue: %+v %v dropped %v; model %+v %v", f, ok, d, p, mok)
				}
			}
			if s.Len() != m.packets() {
				t.Fatalf("%d queued, model %d", s.Len(), m.packets())
			}
			for i := range m.classes {
				if s.ClassLen(i) != m.classes[i].packets() || s.classes[i].backlog != m.classes[i].bytes() {
					t.Fatalf("class %d: %d frames %d bytes, model %d, %d", i, s.ClassLen(i), s.classes[i].backlog, m.classes[i].packets(), m.classes[i].bytes())
				}
			}
		}
	})
}

// enqueueMemory is enqueue under a limit of bytes besides the limit of frames.
func (m *model) enqueueMemory(h uint64, length, ci, fi, memory int) (bool, []uint64) {
	limit := m.limit
	bytes := length
	for _, c := range m.classes {
		bytes += c.bytes()
	}
	if bytes > memory {
		m.limit = -1 // over: the batch drop runs whatever the count
	}
	q, d := m.enqueue(h, length, ci, fi)
	m.limit = limit
	return q, d
}
