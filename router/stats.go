package router

import "sync/atomic"

// Counter is a statistic the router's goroutine writes and anyone may read. The writer adds
// to a plain field and publishes it with one atomic store per batch (Flush, Tick, Report), and
// only when it changed: a frame then costs no locked instruction (a round of nic_router
// publishes eight or so), and readers lag at most one batch.
type Counter struct {
	n   uint64
	pub atomic.Uint64
}

// Load returns the last published value.
func (c *Counter) Load() uint64 { return c.pub.Load() }

func (c *Counter) add(n uint64) { c.n += n }

func (c *Counter) publish() {
	if c.pub.Load() != c.n {
		c.pub.Store(c.n)
	}
}

// Stats are router-wide counters.
type Stats struct {
	Received      Counter // frames handed to Handle
	Sent          Counter // frames submitted to a port
	Dropped       Counter // frames dropped by a rule, a bad header or a missing route
	DroppedFull   Counter // frames dropped because the destination's queue or buffer was full
	NATRefused    Counter // new connections refused because a NAT quota or port space was used up
	ARPTimeouts   Counter // held frames dropped because no ARP reply came
	HeldOverflow  Counter // frames dropped because too many were already held for ARP
	FragmentsSeen Counter // IPv4 fragments (dropped)
}

func (s *Stats) publish() {
	for _, c := range [...]*Counter{&s.Received, &s.Sent, &s.Dropped, &s.DroppedFull, &s.NATRefused,
		&s.ARPTimeouts, &s.HeldOverflow, &s.FragmentsSeen} {
		c.publish()
	}
}

// InterfaceStats are one interface's counters.
type InterfaceStats struct {
	RxFrames, RxBytes Counter
	TxFrames, TxBytes Counter
	DroppedFull       Counter
}

func (s *InterfaceStats) publish() {
	for _, c := range [...]*Counter{&s.RxFrames, &s.RxBytes, &s.TxFrames, &s.TxBytes, &s.DroppedFull} {
		c.publish()
	}
}

// DomainStats are one domain's counters; link-state counts are by protocol (TCP, UDP, ICMP).
type DomainStats struct {
	RxBytes, TxBytes Counter
	Dropped          Counter
	DroppedFragmIPv4 Counter
	LinksOpened      [3]Counter
	LinksDissolved   [3]Counter
	NATRefused       [3]Counter
}

func (s *DomainStats) publish() {
	for _, c := range [...]*Counter{&s.RxBytes, &s.TxBytes, &s.Dropped, &s.DroppedFragmIPv4} {
		c.publish()
	}
	for p := range 3 {
		s.LinksOpened[p].publish()
		s.LinksDissolved[p].publish()
		s.NATRefused[p].publish()
	}
}

// publish makes the counters of the router, of the interfaces that received or sent since
// the last time and of their domains visible to readers.
func (r *Router) publish() {
	r.stats.publish()
	for _, i := range r.touched {
		i.touched = false
		i.stats.publish()
		if i.dom != nil {
			i.dom.stats.publish()
		}
	}
	r.touched = r.touched[:0]
}

// publishAll publishes every counter (Tick and Report: drops can count on domains no
// touched interface belongs to).
func (r *Router) publishAll() {
	r.publish()
	for _, i := range r.ifs {
		i.stats.publish()
	}
	for _, d := range r.domains {
		d.stats.publish()
	}
}

// touch marks i for the next publish.
func (r *Router) touchInterface(i *Interface) {
	if !i.touched {
		i.touched = true
		r.touched = append(r.touched, i)
	}
}
