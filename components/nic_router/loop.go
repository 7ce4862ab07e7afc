package main

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router"
	"github.com/nicstack/nicstack/router/model"
	"github.com/nicstack/nicstack/runtime/affinity"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// LoopOptions are what NewLoop takes.
type LoopOptions struct {
	Log *slog.Logger // default: slog.Default()
	// Counter returns the named counter the loop keeps current (the component's c.Counter);
	// nil: counters are kept privately. The loop keeps frames_received, frames_sent, dropped,
	// dropped_full (destination queue or buffer full), nat_refused, arp_timeouts,
	// ipv6_dropped (of dropped, those for a reason of router.Drop6), icmpv6_errors_limited,
	// neighbor_evictions, codel_dropped, codel_marked and overlimit (the egress queues of
	// <fq-codel>) (the router's Stats), interfaces, rounds and waits (rounds that found
	// nothing to do and waited).
	Counter func(name string) *atomic.Uint64
	// Report receives the router's <report> every interval or trigger (nil: none is made).
	Report func(*config.Node)
	// State is the router's state region (router.Options.State); nil: none.
	State []byte
}

// Loop runs a router over packet-stream sessions on one goroutine. Attach, Detach and
// Configure may be called from any goroutine; they run between two rounds of the loop.
type Loop struct {
	r      *router.Router
	clock  roundClock
	w      *packetstream.Waiter
	log    *slog.Logger
	report func(*config.Node)
	ifs    []*Attachment

	mu      sync.Mutex
	ops     []func()
	running bool // Run has begun; until then calls run at once
	stop    atomic.Bool
	done    chan struct{}

	ctr counters
	sig coalescing

	// batch and frames are the packets take got from one interface, and their bytes; handled
	// are those of them the router is done with, acknowledged together.
	batch   [takeBatch]packetstream.Packet
	frames  [takeBatch][]byte
	handled [takeBatch]packetstream.Packet
	off     netdev.Offload // of the frame being handled
}

// takeBatch is how many frames take prefetches together.
const takeBatch = 32

// Attachment is one session attached to a Loop.
type Attachment struct {
	ifc  *router.Interface
	port *Port
}

// Interface is the router's interface of the attachment; read its counters only.
func (a *Attachment) Interface() *router.Interface { return a.ifc }

// counters are what the loop exposes, copied from the router's every counterEvery.
type counters struct {
	received, sent, dropped, droppedFull, natRefused, arpTimeouts, interfaces, rounds, waits *atomic.Uint64
	ipv6Dropped, icmpv6Limited, neighborEvictions                                            *atomic.Uint64
	codelDropped, codelMarked, overlimit                                                     *atomic.Uint64
	nRounds, nWaits                                                                          uint64
}

func (c *counters) init(get func(string) *atomic.Uint64) {
	if get == nil {
		get = func(string) *atomic.Uint64 { return new(atomic.Uint64) }
	}
	c.received, c.sent, c.dropped = get("frames_received"), get("frames_sent"), get("dropped")
	c.droppedFull, c.natRefused = get("dropped_full"), get("nat_refused")
	c.arpTimeouts = get("arp_timeouts")
	c.ipv6Dropped, c.icmpv6Limited, c.neighborEvictions = get("ipv6_dropped"), get("icmpv6_errors_limited"), get("neighbor_evictions")
	c.interfaces, c.rounds, c.waits = get("interfaces"), get("rounds"), get("waits")
	c.codelDropped, c.codelMarked, c.overlimit = get("codel_dropped"), get("codel_marked"), get("overlimit")
}

// roundClock is the router's clock: the time read once per round, so that frames do not each
// read it (a clock read costs as much as routing a frame here).
type roundClock struct{ now time.Time }

func (c *roundClock) Now() time.Time { return c.now }

// counterEvery is how often counters are copied out and timers checked while traffic flows.
const counterEvery = 100 * time.Millisecond

// NewLoop returns a loop around a new router with an empty config; Run runs it.
func NewLoop(opt LoopOptions) (*Loop, error) {
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	// The loop sleeps at once, as Genode's nic_router waits for its signals: polling bought
	// nothing measurable in bench router (64 and 1500 B) or behind linux_nic, and cost
	// 24-26 % against 14-17 % of a CPU in the seed scenario (47 % against 23 % on the
	// linux_tap fast path) at the same throughput. It sleeps in the netpoller, so its
	// goroutines share a thread and a wakeup is no thread switch (linux_tap: 15.6-17.6
	// against 13.8-15.1 Gbit/s).
	w, err := packetstream.NewSignalWaiter()
	if err != nil {
		return nil, err
	}
	l := &Loop{w: w, log: opt.Log, report: opt.Report, done: make(chan struct{})}
	l.clock.now = time.Now()
	l.r = router.New(router.Options{Clock: &l.clock, Log: opt.Log, State: opt.State})
	l.ctr.init(opt.Counter)
	return l, nil
}

// do runs fn on the loop's goroutine between two rounds and waits for it. Before Run and
// after Stop it runs fn at once (nothing else touches the router then).
func (l *Loop) do(fn func()) {
	ran := make(chan struct{})
	l.mu.Lock()
	if !l.running {
		defer l.mu.Unlock()
		l.clock.now = time.Now()
		fn()
		return
	}
	if l.stop.Load() {
		l.mu.Unlock()
		<-l.done
		l.clock.now = time.Now()
		fn()
		return
	}
	l.ops = append(l.ops, func() { fn(); close(ran) })
	l.mu.Unlock()
	l.w.Wake()
	<-ran
}

func (l *Loop) runOps() {
	l.mu.Lock()
	ops := l.ops
	l.ops = nil
	l.mu.Unlock()
	for _, op := range ops {
		op()
	}
}

// Configure applies a <config>, as model.Parse read it; the router logs its problems and runs
// with what is valid.
func (l *Loop) Configure(cfg *model.Config) {
	l.do(func() { l.r.Configure(cfg) })
}

// NicClients is the <nic-client> list of the current config.
func (l *Loop) NicClients() (ncs []model.NicClient) {
	l.do(func() { ncs = append(ncs, l.r.NicClients()...) })
	return ncs
}

// Attach adds a session: the router sends on out and receives from in; link (may be nil)
// carries the link state to the session's client. mac is the router's MAC on an Uplink or
// nic-client session.
func (l *Loop) Attach(label string, kind router.Kind, mac header.MAC, out *packetstream.Source, in *packetstream.Sink, link func(bool)) (*Attachment, error) {
	a := &Attachment{port: newPort(out, in, link, &l.sig)}
	var err error
	l.do(func() {
		if err = l.w.Add(in); err != nil {
			return
		}
		if err = l.w.Add(out); err != nil {
			l.w.Remove(in)
			return
		}
		// The session's RAM is its two streams' memory, as the supervisor charged it.
		ram := out.Config().RegionSize() + in.Config().RegionSize()
		a.ifc = l.r.Attach(router.Session{Label: label, Kind: kind, MAC: mac, Port: a.port, RAM: ram})
		l.ifs = append(l.ifs, a)
		l.ctr.interfaces.Store(uint64(len(l.ifs)))
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Detach removes a session; once it returns the loop no longer touches its streams.
func (l *Loop) Detach(a *Attachment) { l.detach(a, l.r.Detach) }

// Orphan removes the session of a client that crashed and restarts, its link states and
// DHCP allocations kept for the client's next session (router.Orphan).
func (l *Loop) Orphan(a *Attachment) { l.detach(a, l.r.Orphan) }

func (l *Loop) detach(a *Attachment, leave func(*router.Interface)) {
	l.do(func() {
		for k, x := range l.ifs {
			if x == a {
				l.ifs = append(l.ifs[:k], l.ifs[k+1:]...)
				break
			}
		}
		leave(a.ifc)
		l.w.Remove(a.port.in)
		l.w.Remove(a.port.out)
		l.ctr.interfaces.Store(uint64(len(l.ifs)))
	})
}

// Stats are the router's counters (readable from any goroutine).
func (l *Loop) Stats() *router.Stats { return l.r.Stats() }

// Run runs rounds until Stop.
func (l *Loop) Run() {
	defer close(l.done)
	l.mu.Lock()
	l.running = true
	l.mu.Unlock()
	now := time.Now()
	nextCounters, nextTick, nextReport := now.Add(counterEvery), now.Add(time.Second), time.Time{}
	for !l.stop.Load() {
		now := time.Now()
		l.clock.now = now
		l.runOps()
		full := l.r.Stats().DroppedFull.Load()
		busy := l.round()
		if l.r.Stats().DroppedFull.Load() != full {
			affinity.Yield() // a client on our CPU cannot empty its queue while we route into it
		}
		if !now.Before(nextCounters) {
			nextCounters = now.Add(counterEvery)
			l.copyCounters()
		}
		if !now.Before(nextTick) {
			nextTick = now.Add(time.Second)
			l.r.Tick()
		}
		if iv := l.r.ReportInterval(); iv > 0 && l.report != nil {
			if nextReport.IsZero() || nextReport.Sub(now) > iv {
				nextReport = now.Add(iv)
			}
			if l.r.ReportTriggered() || !now.Before(nextReport) {
				nextReport = now.Add(iv)
				l.report(l.r.Report())
			}
		}
		if !busy {
			l.ctr.nWaits++
			l.w.WaitUntil(nextCounters)
		}
	}
	l.copyCounters()
}

// Stop ends Run and waits for it; the loop does nothing more afterwards.
func (l *Loop) Stop() {
	l.mu.Lock()
	l.stop.Store(true)
	running := l.running
	l.mu.Unlock()
	if !running {
		return
	}
	l.w.Wake()
	<-l.done
	l.runOps() // calls queued before the stop still return
}

// Close releases the loop's waiter, after Stop.
func (l *Loop) Close() error { return l.w.Close() }

// round is Genode's batching: per interface, release what its client acknowledged, then
// handle at most max_packets_per_signal frames; then wake every peer once. It reports whether
// anything happened.
//
// Beyond Genode, while the router is saturated (an interface still had frames when it reached
// max_packets_per_signal), a peer that sleeps is signalled for the frames sent to it once a
// quarter of its queue is waiting or the oldest waited coalesceTime, rather than after every
// round: a signal to a sleeping client on our CPU makes the scheduler switch to it, and a
// switch per round of 50 frames cost about as much as routing them. A round that is not
// saturated signals at once, as Genode does. The packet stream publishes frames every 32 on
// its own (a client that polls sees them); only the signal and the last few wait.
func (l *Loop) round() bool {
	l.ctr.nRounds++
	l.sig.now = l.clock.now.UnixNano()
	max := l.r.MaxPacketsPerSignal()
	busy, saturated := false, false
	for _, a := range l.ifs {
		p := a.port
		if p.reclaim() {
			busy = true
		}
		if len(p.acks) > 0 {
			p.retryAcks()
		}
		n := 0
		for max == 0 || n < max {
			want := len(l.batch)
			if max > 0 {
				want = min(want, max-n)
			}
			k := l.take(p, want)
			if k == 0 {
				break
			}
			n += k
			busy = true
			d := 0
			for j := range k {
				pk := l.batch[j]
				b := l.frames[j]
				var off *netdev.Offload // nil: none, most frames
				if pk.HasOffload() {
					setOffload(&l.off, pk)
					off = &l.off
				}
				if b == nil || l.r.Handle(a.ifc, b, off, frameID(pk)) == router.Done {
					l.handled[d] = pk
					d++
				}
			}
			p.ackAll(l.handled[:d])
		}
		if max > 0 && n >= max && p.in.PacketAvail() {
			saturated = true
		}
	}
	l.sig.lazy = saturated
	l.r.Flush()
	for _, a := range l.ifs {
		a.port.in.Wakeup()
		a.port.wakeOut(!saturated)
	}
	l.sig.lazy = false
	return busy
}

// setOffload stores pk's offload metadata in *o field by field: the compiler builds the
// six-field struct Offload returns with narrow stores, and copying it whole reads them back as
// words, which waits for the stores (no store-to-load forwarding): half of round's samples.
func setOffload(o *netdev.Offload, pk packetstream.Packet) {
	// Each field from its own call: the inlined calls reduce to the field's bits, where a
	// copy of the whole result would be the wide load again.
	o.Flags = pk.Offload().Flags
	o.GSOType = pk.Offload().GSOType
	o.HdrLen = pk.Offload().HdrLen
	o.GSOSize = pk.Offload().GSOSize
	o.CsumStart = pk.Offload().CsumStart
	o.CsumOffset = pk.Offload().CsumOffset
}

// take gets up to want frames of p into l.batch and l.frames, and has the first line of each
// fetched at once: the frames were written on the client's CPU, and the misses on them
// overlap instead of stalling one frame after another. It takes only as many frames as the ack
// queue has room for (Genode's ready_to_ack); an acknowledgement that still finds it full (a
// held frame released meanwhile took the room) waits in p.acks.
func (l *Loop) take(p *Port, want int) int {
	k := p.in.TryGetBatch(l.batch[:want], l.frames[:want])
	for _, b := range l.frames[:k] {
		if len(b) > 0 {
			prefetch(&b[0])
		}
	}
	return k
}

func (l *Loop) copyCounters() {
	s := l.r.Stats()
	c := &l.ctr
	c.received.Store(s.Received.Load())
	c.sent.Store(s.Sent.Load())
	c.dropped.Store(s.Dropped.Load())
	c.droppedFull.Store(s.DroppedFull.Load())
	c.natRefused.Store(s.NATRefused.Load())
	c.arpTimeouts.Store(s.ARPTimeouts.Load())
	var v6 uint64
	for k := range s.IPv6Dropped {
		v6 += s.IPv6Dropped[k].Load()
	}
	c.ipv6Dropped.Store(v6)
	c.icmpv6Limited.Store(s.ICMPv6ErrorsLimited.Load())
	c.neighborEvictions.Store(s.NeighborEvictions.Load())
	c.codelDropped.Store(s.CoDelDropped.Load())
	c.codelMarked.Store(s.CoDelMarked.Load())
	c.overlimit.Store(s.Overlimit.Load())
	c.rounds.Store(c.nRounds)
	c.waits.Store(c.nWaits)
}
