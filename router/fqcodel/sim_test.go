package fqcodel

import (
	"slices"
	"testing"
)

// A simulation in simulated time: sources queue frames into a scheduler, a link of fixed
// rate sends them one at a time, and a window-based source (AIMD, as TCP Reno with ECN)
// learns of its marks and drops a round trip later.

const (
	linkRate = 12.5e6 // bytes/s: 100 Mbit/s
	bulkLen  = 1514
)

// txTime is how long the link takes to send n bytes.
func txTime(n int) int64 { return int64(float64(n) * 1e9 / linkRate) }

type source struct {
	class int
	key   Key
	len   int
	every int64 // ns between frames, at most
	ect   bool
	// window: a responsive source sends only while fewer than cwnd frames are unanswered.
	window         bool
	cwnd           float64
	inflight       int
	recoverUntil   int64 // one decrease a round trip
	next           int64
	sent, bytesOut int
	sojourn        []int64 // of each frame the link sent, ns, with its time
	at             []int64
}

type feedback struct {
	due        int64
	src        int
	congestion bool
}

type sim struct {
	s        *Scheduler
	srcs     []*source
	rtt      int64 // the rest of a round trip: from the link to the receiver and back
	now      int64
	linkFree int64
	meta     []struct {
		src int
		t   int64
	}
	fb      []feedback
	dropped []uint64
}

func (m *sim) send(i int) {
	src := m.srcs[i]
	h := uint64(len(m.meta))
	m.meta = append(m.meta, struct {
		src int
		t   int64
	}{i, m.now})
	src.sent++
	src.inflight++
	var q bool
	q, m.dropped = m.s.Enqueue(h, src.len, &src.key, src.class, src.ect, m.now, m.dropped[:0])
	_ = q
	m.lost()
}

// lost tells the sources of dropped frames, a round trip later.
func (m *sim) lost() {
	for _, h := range m.dropped {
		m.fb = append(m.fb, feedback{m.now + m.rtt, m.meta[h].src, true})
	}
	m.dropped = m.dropped[:0]
}

func (m *sim) run(until int64) {
	for m.now < until {
		// Feedback due: one decrease a round trip for marks and losses, else a frame's
		// worth of increase a round trip.
		for len(m.fb) > 0 && m.fb[0].due <= m.now {
			f := m.fb[0]
			m.fb = m.fb[1:]
			src := m.srcs[f.src]
			src.inflight--
			if !src.window {
				continue
			}
			if f.congestion {
				if m.now >= src.recoverUntil {
					src.cwnd = max(src.cwnd/2, 2)
					src.recoverUntil = m.now + m.rtt + m.s.cfg.Target
				}
			} else {
				src.cwnd += 1 / src.cwnd
			}
		}
		for i, src := range m.srcs {
			for src.next <= m.now && (!src.window || float64(src.inflight) < src.cwnd) {
				m.send(i)
				src.next += src.every
			}
			if src.next < m.now { // held back by its window: no burst of catching up
				src.next = m.now
			}
		}
		if m.linkFree <= m.now {
			f, ok, d := m.s.Dequeue(m.now, m.dropped[:0])
			m.dropped = d
			m.lost()
			if ok {
				mt := m.meta[f.Handle]
				src := m.srcs[mt.src]
				src.sojourn = append(src.sojourn, m.now-mt.t)
				src.at = append(src.at, m.now)
				src.bytesOut += f.Len
				m.linkFree = m.now + txTime(f.Len)
				m.fb = append(m.fb, feedback{m.linkFree + m.rtt, mt.src, f.CE})
			}
		}
		// The next event.
		next := until
		if m.s.Len() > 0 && m.linkFree > m.now {
			next = min(next, m.linkFree)
		}
		for _, src := range m.srcs {
			if !src.window || float64(src.inflight) < src.cwnd {
				next = min(next, max(src.next, m.now+1))
			}
		}
		if len(m.fb) > 0 {
			next = min(next, max(m.fb[0].due, m.now+1))
		}
		if m.s.Len() > 0 && m.linkFree <= m.now {
			next = m.now // the link is free and frames wait
		}
		m.now = max(next, m.now+1)
	}
}

func newSim(t *testing.T, cfg Config, rtt int64, srcs ...*source) *sim {
	t.Helper()
	cfg.Seed = 1
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, src := range srcs {
		src.key.SPort = uint16(i + 1)
		if src.window {
			src.cwnd = 2
		}
	}
	return &sim{s: s, srcs: srcs, rtt: rtt}
}

// percentile p (0..100) of v.
func percentile(v []int64, p int) int64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[(len(v)-1)*p/100]
}

// since are the sojourns of frames the link sent from t on.
func (src *source) since(t int64) []int64 {
	i, _ := slices.BinarySearch(src.at, t)
	return src.sojourn[i:]
}

// A sparse flow (one small frame each 10 ms) beside a bulk flow twice as fast as the link,
// unresponsive: the sparse flow's frames wait at most the frame the link is sending, one
// quantum, while the bulk flow's queue grows to the limit.
func TestSimSparseBesideUnresponsiveBulk(t *testing.T) {
	cfg := Defaults
	cfg.Limit = 1000
	bulk := &source{len: bulkLen, every: txTime(bulkLen) / 2}
	sparse := &source{len: 64, every: 10 * ms, next: 1234567}
	m := newSim(t, cfg, 20*ms, bulk, sparse)
	m.run(2e9)
	q := txTime(cfg.Quantum)
	if len(sparse.sojourn) < 190 {
		t.Fatalf("sparse flow sent %d frames in 2 s", len(sparse.sojourn))
	}
	if worst := slices.Max(sparse.sojourn); worst > q {
		t.Errorf("sparse flow waited up to %d ns, more than a quantum's %d", worst, q)
	}
	t.Logf("sparse sojourn p50 %d ns, max %d ns; bulk p50 %d µs; drops %+v", percentile(sparse.sojourn, 50),
		slices.Max(sparse.sojourn), percentile(bulk.sojourn, 50)/1000, m.s.Stats())

	// Against one FIFO of the same limit (one flow bucket, CoDel off): the sparse flow
	// waits behind the whole queue, 1000 frames of which the head drops take half.
	cfg.Flows, cfg.Target, cfg.Interval = 1, 1<<60, 1<<60
	fifoBulk := &source{len: bulkLen, every: txTime(bulkLen) / 2}
	fifoSparse := &source{len: 64, every: 10 * ms, next: 1234567}
	newSim(t, cfg, 20*ms, fifoBulk, fifoSparse).run(2e9)
	if p50 := percentile(fifoSparse.since(1e9), 50); p50 < 400*q {
		t.Errorf("through a FIFO the sparse flow waited p50 %d µs only", p50/1000)
	} else {
		t.Logf("through a FIFO: sparse p50 %d µs", p50/1000)
	}
}

// The same beside a responsive bulk flow (AIMD, 2 ms round trip besides the queue, as
// between guests and a host's uplink): CoDel holds the bulk flow's queue near target, by ECN
// marks or by drops, and the link stays busy. (With a round trip much longer than target,
// one such flow cannot fill the link by design: CoDel's standing queue is less than a
// window's worth after a halving.)
func TestSimSparseBesideResponsiveBulk(t *testing.T) {
	for _, ecn := range []bool{true, false} {
		name := "drop"
		if ecn {
			name = "ecn"
		}
		t.Run(name, func(t *testing.T) {
			cfg := Defaults
			cfg.ECN = ecn
			bulk := &source{len: bulkLen, every: txTime(bulkLen) / 2, window: true, ect: true}
			sparse := &source{len: 64, every: 10 * ms, next: 1234567, ect: true}
			m := newSim(t, cfg, 2*ms, bulk, sparse)
			m.run(20e9)
			late := bulk.since(10e9) // settled
			p50, p90 := percentile(late, 50), percentile(late, 90)
			if p50 > 2*cfg.Target || p90 > 4*cfg.Target {
				t.Errorf("bulk flow's sojourn p50 %d µs, p90 %d µs, target %d µs", p50/1000, p90/1000, cfg.Target/1000)
			}
			if worst := slices.Max(sparse.sojourn); worst > txTime(cfg.Quantum) {
				t.Errorf("sparse flow waited up to %d ns", worst)
			}
			util := float64(bulk.bytesOut+sparse.bytesOut) / (linkRate * 20)
			if util < 0.97 {
				t.Errorf("link busy %.3f of the time", util)
			}
			t.Logf("bulk sojourn p50 %d µs p90 %d µs; sparse max %d ns; link %.3f busy; %+v", p50/1000, p90/1000,
				slices.Max(sparse.sojourn), util, m.s.Stats())
		})
	}
}

// bytesShare is the share of bytes each source sent from halfway through.
func shares(srcs []*source, total int64) []float64 {
	out := make([]float64, len(srcs))
	sum := 0.0
	for i, src := range srcs {
		for j := range src.at {
			if src.at[j] >= total/2 {
				out[i] += float64(src.len)
			}
		}
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// Two bulk flows of different frame sizes, each twice as fast as the link: DRR gives them
// the same bytes, within 1 %.
func TestSimFairFlows(t *testing.T) {
	cfg := Defaults
	cfg.Limit = 1000
	a := &source{len: 1514, every: txTime(1514) / 2}
	b := &source{len: 600, every: txTime(600) / 2}
	m := newSim(t, cfg, 20*ms, a, b)
	m.run(2e9)
	sh := shares(m.srcs, 2e9)
	if sh[0] < 0.495 || sh[0] > 0.505 {
		t.Errorf("shares %.4f", sh)
	}
	t.Logf("shares %.4f", sh)
}

// Two sessions, one with one bulk flow and one with eight, each session twice as fast as
// the link: each gets half of it, within 1 %, and the eight share theirs.
func TestSimFairClasses(t *testing.T) {
	cfg := Defaults
	cfg.Limit, cfg.Classes = 1000, 2
	srcs := []*source{{len: 1514, every: txTime(1514) / 2}}
	for range 8 {
		srcs = append(srcs, &source{class: 1, len: 1514, every: txTime(1514) * 4})
	}
	m := newSim(t, cfg, 20*ms, srcs...)
	m.run(2e9)
	sh := shares(m.srcs, 2e9)
	one := sh[0]
	if one < 0.495 || one > 0.505 {
		t.Errorf("the one-flow session's share %.4f", one)
	}
	for _, x := range sh[1:] {
		if x < 0.0625*0.95 || x > 0.0625*1.05 {
			t.Errorf("shares in the eight-flow session %.4f", sh[1:])
			break
		}
	}
	t.Logf("shares %.4f", sh)
}

// A sparse flow in a session that is itself busy, beside another busy session: the sessions
// take turns a quantum each, and within its session the sparse flow goes first, so it waits
// at most the frame being sent and the other session's quantum.
func TestSimSparseInABusySession(t *testing.T) {
	cfg := Defaults
	cfg.Limit, cfg.Classes = 1000, 2
	other := &source{len: bulkLen, every: txTime(bulkLen) / 2}
	own := &source{class: 1, len: bulkLen, every: txTime(bulkLen) / 2}
	sparse := &source{class: 1, len: 64, every: 10 * ms, next: 1234567}
	m := newSim(t, cfg, 20*ms, other, own, sparse)
	m.run(2e9)
	if worst := slices.Max(sparse.sojourn); worst > 2*txTime(cfg.Quantum) {
		t.Errorf("sparse flow waited up to %d ns, more than two quanta's %d", worst, 2*txTime(cfg.Quantum))
	}
	sh := shares([]*source{other, own}, 2e9)
	t.Logf("sparse sojourn p50 %d ns, max %d ns; the bulk flows' shares %.4f", percentile(sparse.sojourn, 50), slices.Max(sparse.sojourn), sh)
}
