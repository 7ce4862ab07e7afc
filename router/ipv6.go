package router

import (
	"net/netip"
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// IPv6 is our extension to Genode's router (docs/ipv6.md): a domain with interface_ipv6 has
// a global address and, on each of its interfaces, a link-local one from the router's MAC
// there. Within the domain the router is a hub for IPv6 as for IPv4; between domains it
// routes by the rules with IPv6 dst prefixes, decrementing the hop limit, with link states
// and NAT66 as IPv4 (link6.go).

// ip6Config is a domain's IPv6 identity, from interface_ipv6 and gateway_ipv6.
type ip6Config struct {
	valid   bool
	addr    [16]byte
	prefix  netip.Prefix // masked: the on-link prefix
	gateway [16]byte
	hasGW   bool
	// dup: duplicate address detection found addr taken, so the router does not use it;
	// dad: till when (Unix nanoseconds) DAD listens for a duplicate.
	dup bool
	dad int64
}

func newIP6Config(p netip.Prefix, gw netip.Addr) ip6Config {
	c := ip6Config{valid: true, addr: p.Addr().As16(), prefix: p.Masked()}
	if gw.IsValid() {
		c.gateway, c.hasGW = gw.As16(), true
	}
	return c
}

// onLink reports whether a is in the domain's prefix.
func (c *ip6Config) onLink(a [16]byte) bool {
	return c.valid && c.prefix.Contains(netip.AddrFrom16(a))
}

// own6 reports whether a is an address the router uses at interface i of domain d.
func own6(i *Interface, d *domain, a [16]byte) bool {
	return a == i.ll && !i.llDup || d.ip6.valid && !d.ip6.dup && a == d.ip6.addr
}

// src6 is the router's source address for what it sends out of i: the domain's global
// address, or the link-local one while that is taken.
func src6(i *Interface, d *domain) [16]byte {
	if d.ip6.valid && !d.ip6.dup {
		return d.ip6.addr
	}
	return i.ll
}

// dadWindow is how long the router listens for a duplicate of its addresses after it
// solicited them (RFC 4862 5.1: RetransTimer, 1 s). It uses them meanwhile, optimistically
// (RFC 4429): a guest need not wait for its router.
const dadWindow = time.Second

// join6 gives interface i, which joined d, the router's IPv6 identity there: its link-local
// address, and DAD for that and the domain's address.
func (r *Router) join6(i *Interface, d *domain) {
	if !d.ip6.valid && d.slaac == nil {
		return
	}
	i.ll, i.llDup = header.LinkLocal(i.routerMAC), false
	i.llDAD = r.now.Add(dadWindow).UnixNano()
	d.ip6.dad = i.llDAD
	r.solicitDAD(i, i.ll)
	if d.ip6.valid && !d.ip6.dup {
		r.solicitDAD(i, d.ip6.addr)
	}
	if d.slaac != nil {
		d.slaac.start(r, d) // a link that comes (back): solicit at once
	}
	if d.m.RA != nil {
		d.ra.next, d.ra.initial = r.nowNs, 0 // the next Tick advertises
	}
}

// drop6 counts an IPv6 frame dropped for why and drops it.
func (r *Router) drop6(d *domain, why Drop6) Verdict {
	r.stats.IPv6Dropped[why].add(1)
	return r.drop(d, why.String())
}

// handleIPv6 routes an IPv6 frame from interface i: NDP and echo for the router, the hub
// within the domain, the rules between domains.
func (r *Router) handleIPv6(i *Interface, d *domain, frame []byte, off *netdev.Offload, id uint64) Verdict {
	if !d.ip6.valid && d.slaac == nil {
		return r.drop(d, "unknown network layer protocol") // as Genode's router, which has no IPv6
	}
	ip, ok := header.NewIPv6(frame[header.EthLen:])
	if !ok {
		return r.drop6(d, Drop6Header)
	}
	c := header.WalkIPv6(ip)
	switch {
	case c.Drop == header.ChainRoutingType0:
		return r.drop6(d, Drop6RoutingType0)
	case c.Drop != header.ChainOK:
		if d.m.VerbosePacketDrop {
			r.log.Info("[" + d.name + "] IPv6 extension header chain: " + c.Drop.String())
		}
		return r.drop6(d, Drop6Chain)
	case c.Frag.Is:
		return r.drop6(d, Drop6Fragment)
	}
	src, dst := ip.Src(), ip.Dst()
	var m header.ICMPv6
	if c.Proto == header.ProtoICMPv6 {
		if m, ok = header.NewICMPv6(ip[c.Offset:]); !ok {
			return r.drop6(d, Drop6Header)
		}
		if t := m.Type(); t >= header.NDPRouterSolicit && t <= header.NDPRedirect {
			return r.handleNDP(i, d, frame, off, ip, &c)
		}
	}
	if d.slaac != nil && c.Proto == header.ProtoUDP && len(ip)-c.Offset >= header.UDPLen &&
		header.Ports(ip[c.Offset:]).Dst() == header.DHCPv6ClientPort && own6(i, d, dst) {
		d.slaac.dhcp.receive(r, d, i, ip, ip[c.Offset:])
		return Done
	}
	if !d.ip6.valid {
		return r.drop(d, "no IPv6 address yet (SLAAC)") // as IPv4 waits for its DHCP lease
	}
	if header.IsMulticast6(dst) {
		// The router joins no group but NDP's: multicast stays within the domain.
		r.domainBroadcast(i, d, frame, off)
		return Done
	}
	toRouter := own6(i, d, dst)
	key, flow := flowKeyOf6(ip, &c, m)
	if toRouter && m != nil && m.Type() == header.ICMPv6EchoRequest && d.m.ICMPEchoServer {
		if !m.ChecksumValid(src, dst) {
			return r.drop(d, "bad ICMPv6 checksum")
		}
		r.echoReply6(i, frame, ip, m)
		return Done
	}
	// Link states first, as IPv4's: the replies of a flow, NATed to the router's address
	// or routed back to a client, pass without a rule of their own.
	if flow {
		if s := r.lookup6(d, &key); s != nil {
			return r.viaLink6(i, s, frame, off, id, ip, &c)
		}
	}
	if m != nil && m.IsError() && c.Offset == header.IPv6Len {
		if k, ok := quoted6(m); ok {
			if s := r.lookup6(d, &k); s != nil {
				return r.linkError6(i, s, frame, off, id, ip)
			}
		}
	}
	if toRouter && flow && key.proto != header.ProtoICMPv6 && dst == d.ip6.addr {
		if f, ok := d.forward6[protoIndex(key.proto)][key.dport]; ok {
			return r.forwardPort6(i, d, frame, off, id, ip, &c, &key, f)
		}
	}
	switch {
	case toRouter:
		if m != nil {
			// Other ICMPv6 messages to the router, informational or errors, are dropped
			// silently (RFC 4443 2.4(b), (d)).
			return r.drop(d, "ICMPv6 message to the router")
		}
		r.icmp6Error(i, d, frame, ip, header.ICMPv6DestUnreach, header.ICMPv6PortUnreachable, 0)
		return r.drop(d, "IPv6 packet to the router")
	case header.IsLinkLocal6(dst) || d.ip6.onLink(dst):
		r.domainBroadcast(i, d, frame, off)
		return Done
	case header.IsUnspecified6(src) || header.IsLinkLocal6(src):
		r.icmp6Error(i, d, frame, ip, header.ICMPv6DestUnreach, header.ICMPv6BeyondScope, 0)
		return r.drop6(d, Drop6Scope)
	}
	return r.route6(i, d, frame, off, id, ip, &c, m, &key, flow)
}

// route6 routes a packet to another domain by the first rule with an IPv6 prefix that
// matches, as IPv4's rules route a link state's first packet: the longest-prefix <tcp>/<udp>
// rule (permit-any before permit) or <icmp> rule (echo and errors), then <ip>. A TCP or UDP
// packet or an echo request (flow, key) routed by a <tcp>, <udp> or <icmp> rule opens a link
// state, NATed where the target domain has <nat> for d (NAT66); what an <ip> rule routes,
// and ICMPv6 that opens no link, passes as it is, checked on its own.
func (r *Router) route6(i *Interface, d *domain, frame []byte, off *netdev.Offload, id uint64, ip header.IPv6, c *header.IPv6Chain, m header.ICMPv6, key *flowKey6, flow bool) Verdict {
	dst := ip.Dst()
	var dport uint16
	has := m != nil
	if l4 := ip[c.Offset:]; c.Proto == header.ProtoTCP || c.Proto == header.ProtoUDP {
		has = len(l4) >= 4
		if has {
			dport = header.Ports(l4).Dst()
		}
	}
	to, code, stateful := d.decide6(c.Proto, dst, dport, has)
	if to == nil {
		if m == nil || !m.IsError() {
			r.icmp6Error(i, d, frame, ip, header.ICMPv6DestUnreach, code, 0)
		}
		return r.drop6(d, Drop6NoRule)
	}
	opens := stateful && flow && (m == nil || m.Type() == header.ICMPv6EchoRequest)
	if _, nat := to.natQuota(d, protoIndex(c.Proto)); nat && stateful && !opens {
		return r.drop(d, "no link state for a packet to translate") // it would leave un-NATed
	}
	mac, v, ok := r.out6(i, d, to, frame, off, id, ip, dst)
	if !ok {
		return v
	}
	if !opens {
		r.sendTo6(i, to, frame, off, &mac, nil, c.Proto, c.Offset)
		return Done
	}
	l, ok := r.newLink6(i, d, to, *key, key.dst, key.dport)
	if !ok {
		return r.drop(d, "link state refused")
	}
	return r.viaLink6(i, &l.sides[0], frame, off, id, ip, c)
}

// out6 checks a packet from domain d for leaving through domain to towards dst: to speaks
// IPv6, the hop limit, to's MTU (else an ICMPv6 error), and the next hop's MAC (else the frame
// waits for it). It returns the MAC, or false with the verdict.
func (r *Router) out6(i *Interface, d, to *domain, frame []byte, off *netdev.Offload, id uint64, ip header.IPv6, dst [16]byte) (macOrNone, Verdict, bool) {
	if !to.ip6.valid {
		return macOrNone{}, r.drop6(d, Drop6NoConfig), false
	}
	if ip.HopLimit() <= 1 {
		r.icmp6Error(i, d, frame, ip, header.ICMPv6TimeExceeded, header.ICMPv6HopLimitExceeded, 0)
		return macOrNone{}, r.drop6(d, Drop6HopLimit), false
	}
	size := len(ip)
	if off.GSOType&^netdev.GSOECN != netdev.GSONone { // a super-frame leaves as segments
		size = int(off.HdrLen) - header.EthLen + int(off.GSOSize)
	}
	if mtu := to.mtu6(); size > mtu {
		r.icmp6Error(i, d, frame, ip, header.ICMPv6PacketTooBig, 0, uint32(mtu))
		return macOrNone{}, r.drop6(d, Drop6TooBig), false
	}
	hop := dst
	if !to.ip6.onLink(dst) {
		if !to.ip6.hasGW {
			r.icmp6Error(i, d, frame, ip, header.ICMPv6DestUnreach, header.ICMPv6NoRoute, 0)
			return macOrNone{}, r.drop(to, "cannot find next hop"), false
		}
		hop = to.ip6.gateway
	}
	mac, ok := r.resolve6(to, hop)
	if !ok {
		return macOrNone{}, r.hold6(i, d, to, hop, frame, off, id), false
	}
	return mac, Done, true
}

// decide6 is the domain the rules send an IPv6 packet to (nil: none), and otherwise the
// destination unreachable code: administratively prohibited where a <tcp>/<udp> rule
// covers the destination but permits not the port, no route where no rule covers it.
// stateful: a <tcp>, <udp> or <icmp> rule routes it, which makes link states; has: a TCP or
// UDP packet carries its ports (dport), an ICMPv6 one is a message (not NDP).
func (d *domain) decide6(proto uint8, dst [16]byte, dport uint16, has bool) (to *domain, code uint8, stateful bool) {
	a := netip.AddrFrom16(dst)
	code = header.ICMPv6NoRoute
	switch {
	case proto == header.ProtoICMPv6 && has:
		for _, r := range d.icmp6Rules {
			if r.dst6.Contains(a) {
				return r.to, 0, true
			}
		}
	case (proto == header.ProtoTCP || proto == header.ProtoUDP) && has:
		rules := d.tcp6Rules
		if proto == header.ProtoUDP {
			rules = d.udp6Rules
		}
		for _, r := range rules {
			if !r.dst6.Contains(a) {
				continue
			}
			if r.permitAny != nil {
				return r.permitAny, 0, true
			}
			if to := r.permit[dport]; to != nil {
				return to, 0, true
			}
			code = header.ICMPv6AdminProhibited
			break // only the longest-prefix rule counts
		}
	}
	for _, r := range d.ip6Rules {
		if r.dst6.Contains(a) {
			return r.to, 0, false
		}
	}
	return nil, code, false
}

// sendTo6 copies an IPv6 frame to every interface of domain to but the one it came from,
// to the next hop's MAC, with the hop limit one less and, for a link state, rewritten by rw
// (the upper layer, proto, at l4off).
func (r *Router) sendTo6(from *Interface, to *domain, frame []byte, off *netdev.Offload, mac *macOrNone, rw *rewrite6, proto uint8, l4off int) {
	sent := false
	for _, o := range to.ifs {
		if o == from {
			continue
		}
		sent = true
		buf := r.transmit(o, frame)
		if buf == nil {
			continue
		}
		setMACs(buf, o, mac)
		ip := header.IPv6(buf[header.EthLen:])
		ip.SetHopLimit(ip.HopLimit() - 1)
		if rw != nil {
			rw.apply(ip, proto, l4off, off)
		}
		r.submit(o, buf, off)
	}
	if !sent {
		r.drop(to, "destination domain has no other interface")
	}
}

// frame6 is a new frame of an IPv6 packet of n bytes from the router at i to dst.
func frame6(i *Interface, dst header.MAC, n int) []byte {
	b := make([]byte, header.EthLen+n)
	e := header.Eth(b)
	e.SetDst(dst)
	e.SetSrc(i.routerMAC)
	e.SetType(header.EtherTypeIPv6)
	return b
}

// echoReply6 answers an ICMPv6 echo request m to the router, back out of interface i.
func (r *Router) echoReply6(i *Interface, frame []byte, ip header.IPv6, m header.ICMPv6) {
	src, to := ip.Dst(), ip.Src()
	b := frame6(i, header.Eth(frame).Src(), header.IPv6Len+len(m))
	header.PutIPv6(b[header.EthLen:], len(m), header.ProtoICMPv6, 64, src, to)
	out := header.ICMPv6(b[header.EthLen+header.IPv6Len:])
	copy(out, m)
	out[0] = header.ICMPv6EchoReply
	out.UpdateChecksum(src, to)
	r.emit(i, b)
}

// ICMPv6 errors are rate limited as RFC 4443 2.4(f) asks, by a token bucket of the router:
// icmp6Burst at once, then one per icmp6Gap.
const (
	icmp6Gap   = int64(100 * time.Millisecond)
	icmp6Burst = 10
)

// icmp6Allowed takes a token from the bucket, or reports false when it is empty. The bucket
// is kept as the time its tokens are all back (a GCRA).
func (r *Router) icmp6Allowed() bool {
	full := max(r.icmp6Full, r.nowNs)
	if full-r.nowNs > (icmp6Burst-1)*icmp6Gap {
		return false
	}
	r.icmp6Full = full + icmp6Gap
	return true
}

// icmp6Error answers the packet ip in frame, from interface i, with an ICMPv6 error of typ
// and code (param: a packet too big's MTU), quoting as much of it as fits in 1280 bytes;
// never for a packet from no single host, nor for one to a group but with packet too big
// (RFC 4443 2.4(e)); callers do not answer an error with one.
func (r *Router) icmp6Error(i *Interface, d *domain, frame []byte, ip header.IPv6, typ, code uint8, param uint32) {
	to := ip.Src()
	if header.IsUnspecified6(to) || header.IsMulticast6(to) || header.IsMulticast6(ip.Dst()) && typ != header.ICMPv6PacketTooBig {
		return
	}
	if !r.icmp6Allowed() {
		r.stats.ICMPv6ErrorsLimited.add(1)
		return
	}
	b := frame6(i, header.Eth(frame).Src(), header.IPv6MinMTU)
	n := header.PutICMPv6Error(b[header.EthLen:], typ, code, param, src6(i, d), to, ip)
	r.emit(i, b[:header.EthLen+n])
}
