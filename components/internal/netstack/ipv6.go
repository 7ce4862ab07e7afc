package netstack

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// ipv6Options make the stack an IPv6 host as Linux is one with forwarding off: a link-local
// address from the MAC (modified EUI-64), duplicate address detection for every address, router
// solicitations when the link comes up, and from router advertisements the default routers,
// the on-link prefixes and a SLAAC address for each autonomous prefix (RFC 4861, 4862).
func ipv6Options(d *ndpEvents) ipv6.Options {
	ndp := ipv6.DefaultNDPConfigurations()
	ndp.HandleRAs = ipv6.HandlingRAsEnabledWhenForwardingDisabled
	ndp.DiscoverDefaultRouters = true
	ndp.DiscoverOnLinkPrefixes = true
	ndp.AutoGenGlobalAddresses = true
	return ipv6.Options{NDPConfigs: ndp, AutoGenLinkLocal: true, NDPDisp: d, DADConfigs: stack.DefaultDADConfigurations()}
}

// AddressEvent is a change of the stack's IPv6 addresses, for the guest's log.
type AddressEvent struct {
	Prefix netip.Prefix
	// Ready: the address passed duplicate address detection and is in use; false: it was
	// found a duplicate, or its lifetime from the router ended.
	Ready  bool
	Reason string // why it is not (or no longer) in use
}

// ndpEvents is the stack's NDP dispatcher. gVisor calls it with NDP's locks held and forbids
// calling back into the stack, so it only notes what the router advertised (default routers,
// on-link prefixes) and what became of addresses, and wakes the stack's apply loop, which sets
// the route table and tells the Config's OnAddress.
type ndpEvents struct {
	mu      sync.Mutex
	routers map[tcpip.Address]struct{} // default routers (link-local addresses)
	onLink  map[tcpip.Subnet]struct{}
	events  []AddressEvent
	prefix  map[tcpip.Address]int // the prefix length of addresses made by SLAAC
	// global are the addresses beyond link-local scope that passed duplicate address
	// detection: until there is one, a default route would make a connection to a global
	// address take a link-local source, which no router forwards (RFC 4291 2.5.6), and its
	// SYN be retried with it for minutes after the SLAAC address came.
	global map[tcpip.Address]struct{}
	kick   chan struct{}
}

func newNDPEvents() *ndpEvents {
	return &ndpEvents{routers: map[tcpip.Address]struct{}{}, onLink: map[tcpip.Subnet]struct{}{},
		prefix: map[tcpip.Address]int{}, global: map[tcpip.Address]struct{}{}, kick: make(chan struct{}, 1)}
}

var _ ipv6.NDPDispatcher = (*ndpEvents)(nil)

// change runs f under the lock and wakes the apply loop.
func (d *ndpEvents) change(f func()) {
	d.mu.Lock()
	f()
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *ndpEvents) OnDuplicateAddressDetectionResult(_ tcpip.NICID, a tcpip.Address, r stack.DADResult) {
	d.change(func() {
		bits, ok := d.prefix[a]
		if !ok {
			bits = 128
			if header.IsV6LinkLocalUnicastAddress(a) {
				bits = 64
			}
		}
		ev := AddressEvent{Prefix: netip.PrefixFrom(addrOf(a), bits)}
		delete(d.global, a)
		switch r := r.(type) {
		case *stack.DADSucceeded:
			ev.Ready = true
			if !header.IsV6LinkLocalUnicastAddress(a) {
				d.global[a] = struct{}{}
			}
		case *stack.DADDupAddrDetected:
			ev.Reason = "duplicate address detected (held by " + string(r.HolderLinkAddress) + ")"
		case *stack.DADError:
			ev.Reason = "duplicate address detection failed: " + r.Err.String()
		default:
			return // aborted: the address was removed meanwhile
		}
		d.events = append(d.events, ev)
	})
}

func (d *ndpEvents) OnOffLinkRouteUpdated(_ tcpip.NICID, dest tcpip.Subnet, router tcpip.Address, _ header.NDPRoutePreference) {
	if dest.Prefix() != 0 {
		return // more specific routes (RFC 4191) are not asked for
	}
	d.change(func() { d.routers[router] = struct{}{} })
}

func (d *ndpEvents) OnOffLinkRouteInvalidated(_ tcpip.NICID, dest tcpip.Subnet, router tcpip.Address) {
	if dest.Prefix() != 0 {
		return
	}
	d.change(func() { delete(d.routers, router) })
}

func (d *ndpEvents) OnOnLinkPrefixDiscovered(_ tcpip.NICID, p tcpip.Subnet) {
	d.change(func() { d.onLink[p] = struct{}{} })
}

func (d *ndpEvents) OnOnLinkPrefixInvalidated(_ tcpip.NICID, p tcpip.Subnet) {
	d.change(func() { delete(d.onLink, p) })
}

func (d *ndpEvents) OnAutoGenAddress(_ tcpip.NICID, a tcpip.AddressWithPrefix) stack.AddressDispatcher {
	d.change(func() { d.prefix[a.Address] = a.PrefixLen })
	return nil
}

func (d *ndpEvents) OnAutoGenAddressDeprecated(tcpip.NICID, tcpip.AddressWithPrefix) {}

func (d *ndpEvents) OnAutoGenAddressInvalidated(_ tcpip.NICID, a tcpip.AddressWithPrefix) {
	d.change(func() {
		delete(d.prefix, a.Address)
		delete(d.global, a.Address)
		d.events = append(d.events, AddressEvent{Prefix: netip.PrefixFrom(addrOf(a.Address), a.PrefixLen), Reason: "the router's lifetime for it ended"})
	})
}

func (*ndpEvents) OnRecursiveDNSServerOption(tcpip.NICID, []tcpip.Address, time.Duration) {}
func (*ndpEvents) OnDNSSearchListOption(tcpip.NICID, []string, time.Duration)             {}
func (*ndpEvents) OnDHCPv6Configuration(tcpip.NICID, ipv6.DHCPv6ConfigurationFromNDPRA)   {}

// take returns the routes NDP found (on-link prefixes, then default routers), whether the
// interface has a global address in use, and the address events since the last call.
func (d *ndpEvents) take() ([]tcpip.Route, bool, []AddressEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var routes []tcpip.Route
	for p := range d.onLink {
		routes = append(routes, tcpip.Route{Destination: p, NIC: nicID})
	}
	for r := range d.routers {
		routes = append(routes, tcpip.Route{Destination: header.IPv6EmptySubnet, Gateway: r, NIC: nicID})
	}
	ev := d.events
	d.events = nil
	return routes, len(d.global) > 0, ev
}

// applyNDP keeps the route table in step with what NDP found until done closes.
func (s *Stack) applyNDP(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-s.ndp.kick:
		}
		routes, global, events := s.ndp.take()
		s.mu.Lock()
		s.ndpRoutes, s.global6 = routes, global
		s.setRoutes()
		s.mu.Unlock()
		if s.onAddress != nil {
			for _, ev := range events {
				s.onAddress(ev)
			}
		}
	}
}

// SolicitRouters starts router solicitation anew (RFC 4861 §6.3.7), as Linux does when a link
// comes up: the stack's first solicitations may have gone out before there was a link, and
// the router then waits minutes between unsolicited advertisements. gVisor offers no call for
// it but the change back from router to host, so the interface is a router for an instant;
// with MLD off it announces nothing as one, and the routes and addresses NDP found stay.
func (s *Stack) SolicitRouters() {
	_, _ = s.s.SetNICForwarding(nicID, ipv6.ProtocolNumber, true)
	_, _ = s.s.SetNICForwarding(nicID, ipv6.ProtocolNumber, false)
}

// linkLocal is the on-link route of fe80::/64, which every IPv6 interface has.
var linkLocal = tcpip.Route{Destination: tcpip.AddressWithPrefix{Address: tcpip.AddrFrom16([16]byte{0xfe, 0x80}), PrefixLen: 64}.Subnet(), NIC: nicID}

// SetAddress6 gives the interface a static IPv6 address (beside its link-local one and any
// SLAAC made), replacing the previous static one, with a route to its prefix and, when gateway
// is valid, a default route through it (a router's link-local address, or one in the prefix).
// The address is in use once duplicate address detection passed (about a second).
func (s *Stack) SetAddress6(p netip.Prefix, gateway netip.Addr) error {
	if !p.Addr().Is6() || p.Addr().Is4In6() {
		return fmt.Errorf("netstack: %v is not an IPv6 prefix", p)
	}
	if gateway.IsValid() && (!gateway.Is6() || gateway.Is4In6()) {
		return fmt.Errorf("netstack: gateway %v is not an IPv6 address", gateway)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.addr6.IsValid() {
		old := tcpip.AddrFrom16(s.addr6.Addr().As16())
		_ = s.s.RemoveAddress(nicID, old)
		s.ndp.change(func() { delete(s.ndp.global, old) })
	}
	pa := tcpip.ProtocolAddress{
		Protocol:          ipv6.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFrom16(p.Addr().As16()), PrefixLen: p.Bits()},
	}
	s.ndp.change(func() { s.ndp.prefix[pa.AddressWithPrefix.Address] = p.Bits() })
	if err := s.s.AddProtocolAddress(nicID, pa, stack.AddressProperties{}); err != nil {
		return fmt.Errorf("netstack: adding %v: %s", p, err)
	}
	s.addr6, s.gateway6 = p, gateway
	s.setRoutes()
	return nil
}

// Addresses6 are the interface's IPv6 addresses in use: link-local, static and SLAAC, without
// the ones still under duplicate address detection.
func (s *Stack) Addresses6() []netip.Prefix {
	var out []netip.Prefix
	for _, pa := range s.s.NICInfo()[nicID].ProtocolAddresses {
		if pa.Protocol != ipv6.ProtocolNumber {
			continue
		}
		if s.s.CheckLocalAddress(nicID, ipv6.ProtocolNumber, pa.AddressWithPrefix.Address) == 0 {
			continue // tentative
		}
		out = append(out, netip.PrefixFrom(addrOf(pa.AddressWithPrefix.Address), pa.AddressWithPrefix.PrefixLen))
	}
	return out
}

// addrOf converts a gVisor address.
func addrOf(a tcpip.Address) netip.Addr {
	ip, _ := netip.AddrFromSlice(a.AsSlice())
	return ip
}
