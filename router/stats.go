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
	FragmentsSeen Counter // IPv4 fragments (dropped)

	// IPv6 (our extension): frames dropped for each reason of Drop6 (counted in Dropped
	// too), ICMPv6 errors the rate limit held back, neighbour-cache entries evicted to stay
	// within its bound.
	IPv6Dropped         [NumDrop6]Counter
	ICMPv6ErrorsLimited Counter
	NeighborEvictions   Counter

	// Egress queues (<fq-codel>, our extension): frames CoDel dropped, frames it marked CE
	// instead, and frames dropped because a queue was over its limit.
	CoDelDropped, CoDelMarked, Overlimit Counter
}

func (s *Stats) publish() {
	for _, c := range [...]*Counter{&s.Received, &s.Sent, &s.Dropped, &s.DroppedFull, &s.NATRefused,
		&s.ARPTimeouts, &s.FragmentsSeen, &s.ICMPv6ErrorsLimited, &s.NeighborEvictions,
		&s.CoDelDropped, &s.CoDelMarked, &s.Overlimit} {
		c.publish()
	}
	for k := range s.IPv6Dropped {
		s.IPv6Dropped[k].publish()
	}
}

// Drop6 is a reason the router drops an IPv6 frame, counted in Stats.IPv6Dropped.
type Drop6 uint8

const (
	Drop6Header       Drop6 = iota // no valid IPv6 header
	Drop6Chain                     // an extension header chain the walker refuses (header.ChainDrop), type 0 routing aside
	Drop6RoutingType0              // a routing header of type 0 (RFC 5095)
	Drop6Fragment                  // a fragment: the router neither reassembles nor forwards them
	Drop6NDPInvalid                // an NDP message that fails header.CheckNDP (hop limit not 255 among its reasons)
	Drop6FromGuest                 // a router advertisement or redirect from a guest: the router is the domain's router
	Drop6HopLimit                  // hop limit exhausted (time exceeded sent)
	Drop6TooBig                    // larger than the egress domain's mtu (packet too big sent)
	Drop6NoRule                    // no rule routes it (destination unreachable sent)
	Drop6Scope                     // a link-local or unspecified source, not to be routed off its link
	Drop6NoConfig                  // the domain, or the target domain, has no usable IPv6 address
	NumDrop6
)

var drop6Names = [NumDrop6]string{"bad IPv6 header", "IPv6 extension header chain refused", "IPv6 routing header type 0",
	"IPv6 fragment", "invalid NDP message", "router advertisement or redirect from a guest", "IPv6 hop limit exceeded",
	"IPv6 packet too big", "IPv6 unroutable", "IPv6 source beyond its scope", "no IPv6 config"}

func (d Drop6) String() string {
	if d < NumDrop6 {
		return drop6Names[d]
	}
	return "?"
}

// InterfaceStats are one interface's counters.
type InterfaceStats struct {
	RxFrames, RxBytes Counter
	TxFrames, TxBytes Counter
	DroppedFull       Counter
	// At the interface's egress queue (<fq-codel>): as Stats'.
	CoDelDropped, CoDelMarked, Overlimit Counter
}

func (s *InterfaceStats) publish() {
	for _, c := range [...]*Counter{&s.RxFrames, &s.RxBytes, &s.TxFrames, &s.TxBytes, &s.DroppedFull,
		&s.CoDelDropped, &s.CoDelMarked, &s.Overlimit} {
		c.publish()
	}
}

// domainStats are a domain's counts for the state report. Only the router's goroutine reads
// them (Report), so they are plain numbers.
type domainStats struct {
	rxBytes, txBytes uint64 // received from and sent to the domain's interfaces
	// left is what the interfaces that left the domain had counted (Genode's
	// Domain_link_stats and Domain_object_stats).
	left reportCounts
}

// reportCounts are the counts of Genode's Interface_link_stats (per protocol),
// Interface_object_stats (ARP waiters, DHCP allocations) and dropped fragments that are not a
// number of live objects: those (link states by state, waiters, allocations) are counted when
// the report is made.
type reportCounts struct {
	links                       [3]linkCounts
	arpWaiters, dhcpAllocations uint64 // destroyed
	droppedFragmIPv4            uint64
}

// linkCounts are one protocol's link states refused for want of RAM (our bound of link states
// per session, maxLinksPerInterface, stands for Genode's session RAM quota) or of NAT ports,
// and destroyed.
type linkCounts struct{ refusedForRAM, refusedForPorts, destroyed uint64 }

func (c *reportCounts) add(o *reportCounts) {
	for p := range c.links {
		c.links[p].refusedForRAM += o.links[p].refusedForRAM
		c.links[p].refusedForPorts += o.links[p].refusedForPorts
		c.links[p].destroyed += o.links[p].destroyed
	}
	c.arpWaiters += o.arpWaiters
	c.dhcpAllocations += o.dhcpAllocations
	c.droppedFragmIPv4 += o.droppedFragmIPv4
}

// publish makes the counters of the router and of the interfaces that received or sent since
// the last time visible to readers.
func (r *Router) publish() {
	r.stats.publish()
	for _, i := range r.touched {
		i.touched = false
		i.stats.publish()
	}
	r.touched = r.touched[:0]
	if r.heldChanged || r.heldRecount {
		r.publishHeld()
	}
}

// publishAll publishes every counter (Tick and Report).
func (r *Router) publishAll() {
	r.publish()
	for _, i := range r.ifs {
		i.stats.publish()
	}
}

// touch marks i for the next publish.
func (r *Router) touchInterface(i *Interface) {
	if !i.touched {
		i.touched = true
		r.touched = append(r.touched, i)
	}
}
