package router

import "sync/atomic"

// Stats are router-wide counters.
type Stats struct {
	Received      atomic.Uint64 // frames handed to Handle
	Sent          atomic.Uint64 // frames submitted to a port
	Dropped       atomic.Uint64 // frames dropped by a rule, a bad header or a missing route
	DroppedFull   atomic.Uint64 // frames dropped because the destination's queue or buffer was full
	NATRefused    atomic.Uint64 // new connections refused because a NAT quota or port space was used up
	ARPTimeouts   atomic.Uint64 // held frames dropped because no ARP reply came
	HeldOverflow  atomic.Uint64 // frames dropped because too many were already held for ARP
	FragmentsSeen atomic.Uint64 // IPv4 fragments (dropped)
}

// InterfaceStats are one interface's counters.
type InterfaceStats struct {
	RxFrames, RxBytes atomic.Uint64
	TxFrames, TxBytes atomic.Uint64
	DroppedFull       atomic.Uint64
}

// DomainStats are one domain's counters; link-state counts are by protocol (TCP, UDP, ICMP).
type DomainStats struct {
	RxBytes, TxBytes atomic.Uint64
	Dropped          atomic.Uint64
	DroppedFragmIPv4 atomic.Uint64
	LinksOpened      [3]atomic.Uint64
	LinksDissolved   [3]atomic.Uint64
	NATRefused       [3]atomic.Uint64
}

// count adds n to a counter. Only the router's goroutine writes counters, so a load and a
// store do (no locked read-modify-write per frame); readers elsewhere still see whole values.
func count(c *atomic.Uint64, n uint64) { c.Store(c.Load() + n) }
