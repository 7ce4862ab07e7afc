package router

import (
	"encoding/binary"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// IPv6 link states (docs/ipv6.md): the links of link.go, with 16-byte addresses. A link is
// one struct for both families (owner, quotas, timeouts, TCP tracking, the state region); an
// IPv6 one keeps its sides' tuples in key6 and is found in its domains' links6. Apart from
// IPv4's table so that IPv4's keys stay 13 bytes and its hot path (fast.go) as it was.

// flowKey6 is flowKey for IPv6; ICMPv6 echo uses the query ID as both ports.
type flowKey6 struct {
	src, dst     [16]byte
	sport, dport uint16
	proto        uint8
}

// flowKeyOf6 is the tuple of a TCP or UDP packet or an ICMPv6 echo (m), whose upper layer
// starts at c.Offset; false for anything else.
func flowKeyOf6(ip header.IPv6, c *header.IPv6Chain, m header.ICMPv6) (flowKey6, bool) {
	k := flowKey6{src: ip.Src(), dst: ip.Dst(), proto: c.Proto}
	switch {
	case c.Proto == header.ProtoTCP || c.Proto == header.ProtoUDP:
		l4 := ip[c.Offset:]
		if len(l4) < 4 {
			return k, false
		}
		k.sport, k.dport = header.Ports(l4).Src(), header.Ports(l4).Dst()
		return k, true
	case m != nil && (m.Type() == header.ICMPv6EchoRequest || m.Type() == header.ICMPv6EchoReply) && len(m) >= 8:
		k.sport, k.dport = m.ID(), m.ID()
		return k, true
	}
	return k, false
}

// rewrite6 is what a packet arriving at a link side with tuple from becomes at the other
// side: its addresses and ports (the echo ID, from sport), and the changes to its transport
// checksum as one's complement sums (RFC 1624): l4Sum for a complete checksum, addrSum for
// one left to the device (a partial checksum holds the pseudo-header's sum only).
type rewrite6 struct {
	src, dst       [16]byte
	sport, dport   uint16
	l4Sum, addrSum uint16
}

// newRewrite6 is newRewrite for IPv6: the transport checksums of TCP, UDP and ICMPv6 all
// cover the pseudo-header, so the addresses go into each.
func newRewrite6(from, to flowKey6) rewrite6 {
	rw := rewrite6{src: to.dst, dst: to.src, sport: to.dport, dport: to.sport}
	a := header.Diff16(from.src, rw.src) + header.Diff16(from.dst, rw.dst)
	rw.addrSum = header.Fold(a)
	if from.proto == header.ProtoICMPv6 {
		rw.l4Sum = header.Fold(a + uint32(^from.sport) + uint32(rw.sport))
	} else {
		rw.l4Sum = header.Fold(a + uint32(^from.sport) + uint32(rw.sport) + uint32(^from.dport) + uint32(rw.dport))
	}
	return rw
}

// apply rewrites packet ip, whose upper layer starts at l4off and which carries the tuple
// the rewrite was made for.
func (rw *rewrite6) apply(ip header.IPv6, proto uint8, l4off int, off *netdev.Offload) {
	ip.SetSrc(rw.src)
	ip.SetDst(rw.dst)
	l4 := ip[l4off:]
	csumOff := header.UDPChecksumOff
	switch proto {
	case header.ProtoICMPv6:
		m := header.ICMPv6(l4)
		binary.BigEndian.PutUint16(m[4:], rw.sport)
		m.SetChecksum(adjustSum(m.Checksum(), rw.l4Sum))
		return
	case header.ProtoTCP:
		csumOff = header.TCPChecksumOff
	}
	ports := header.Ports(l4)
	ports.SetSrc(rw.sport)
	ports.SetDst(rw.dport)
	if len(l4) < csumOff+2 {
		return // a UDP header only: the ports were the packet
	}
	c := binary.BigEndian.Uint16(l4[csumOff:])
	if off.Flags&netdev.OffloadNeedsCsum != 0 {
		c = header.Fold(uint32(c) + uint32(rw.addrSum)) // the device sums the ports
	} else {
		c = adjustSum(c, rw.l4Sum)
		if c == 0 && proto == header.ProtoUDP {
			c = 0xffff
		}
	}
	binary.BigEndian.PutUint16(l4[csumOff:], c)
}

// lookup6 returns the live link side for key in d, dissolving an expired one it meets.
func (r *Router) lookup6(d *domain, key *flowKey6) *side {
	s := d.links6[*key]
	if s == nil {
		return nil
	}
	if r.expired(s.l) {
		r.dissolve(s.l, "timeout")
		return nil
	}
	return s
}

// newLink6 is newLink for IPv6: a link state for the first packet (tuple key) from domain c
// that a rule routes to domain to, to the server at srvAddr and srvPort (key's destination,
// or a forward rule's); with <nat> at to for c (NAT66), the source becomes to's
// interface_ipv6 address and a port or echo ID of to's IPv6 port space, counted against the
// same quota as IPv4's. False when NAT refuses or a tuple is taken.
func (r *Router) newLink6(owner *Interface, c, to *domain, key flowKey6, srvAddr [16]byte, srvPort uint16) (*link, bool) {
	if owner.links >= maxLinksPerInterface {
		owner.counts.links[protoIndex(key.proto)].refusedForRAM++
		if c.m.VerbosePacketDrop {
			r.log.Info("link state refused", "domain", c.name, "interface", owner.label, "reason", "the session's link states are used up")
		}
		return nil, false
	}
	l := &link{p: protoIndex(key.proto), owner: owner, lastActive: r.nowNs, v6: true}
	srv := flowKey6{src: srvAddr, dst: key.src, sport: srvPort, dport: key.sport, proto: key.proto}
	if quota, ok := to.natQuota(c, l.p); ok {
		port, ok := r.allocNAT(owner, c, to, l.p, quota, &to.ports6[l.p])
		if !ok {
			return nil, false
		}
		l.natPort = port
		srv.dst, srv.dport = to.ip6.addr, port
		if l.p == pICMP {
			srv.sport = port
		}
	}
	if to.links6[srv] != nil || c.links6[key] != nil {
		l.freeNAT(c, to)
		return nil, false
	}
	r.enter6(l, c, to, key, srv)
	owner.links++
	r.keepLink(l)
	if r.cfg.Verbose {
		r.log.Info("new link state", "protocol", protoNames[l.p], "client_domain", c.name, "server_domain", to.name,
			"client", addrPort6(key.src, key.sport), "server", addrPort6(srv.src, srv.sport), "nat_port", l.natPort)
	}
	return l, true
}

// enter6 puts IPv6 link l with tuples ck at c and sk at s into both domains and the router.
func (r *Router) enter6(l *link, c, s *domain, ck, sk flowKey6) {
	l.sides[0] = side{l: l, dom: c, key6: ck, idx: 0, rw6: newRewrite6(ck, sk)}
	l.sides[1] = side{l: l, dom: s, key6: sk, idx: 1, rw6: newRewrite6(sk, ck)}
	c.links6[ck] = &l.sides[0]
	s.links6[sk] = &l.sides[1]
	r.links[l] = struct{}{}
}

// admit6 is admit for an IPv6 link l (a reconfiguration, a restart): the rules still route
// its first packet from c to s by a rule that makes link states, to the same server, NAT66
// as before (its port taken again), and neither tuple is taken.
func (r *Router) admit6(l *link, c, s *domain) bool {
	ck, sk := l.sides[0].key6, l.sides[1].key6
	if !c.ip6.valid || !s.ip6.valid {
		return false
	}
	to, addr, port, stateful := c.server6(&ck)
	want := flowKey6{src: addr, dst: ck.src, sport: port, dport: ck.sport, proto: ck.proto}
	if l.natPort != 0 {
		want.dst, want.dport = s.ip6.addr, l.natPort
		if l.p == pICMP {
			want.sport = l.natPort
		}
	}
	if to != s || !stateful || sk != want || c.links6[ck] != nil || s.links6[sk] != nil {
		return false
	}
	if !r.takeNAT(l, c, s, &s.ports6[l.p]) {
		return false
	}
	r.enter6(l, c, s, ck, sk)
	return true
}

// viaLink6 sends a packet that arrived at link side s to the other side, rewritten.
func (r *Router) viaLink6(i *Interface, s *side, frame []byte, off *netdev.Offload, id uint64, ip header.IPv6, c *header.IPv6Chain) Verdict {
	o := s.peer()
	mac, v, ok := r.out6(i, s.dom, o.dom, frame, off, id, ip, o.key6.src)
	if !ok {
		return v
	}
	var seg []byte
	if c.Proto == header.ProtoTCP && len(ip)-c.Offset >= header.TCPLen {
		seg = ip[c.Offset:]
	}
	r.touch(s, seg)
	r.sendTo6(i, o.dom, frame, off, &mac, &s.rw6, c.Proto, c.Offset)
	return Done
}

// quoted6 is the tuple, reversed, of the packet an ICMPv6 error m quotes: the tuple a link
// side of the domain the error came from has if the quoted packet left through that link.
// Only a quote whose upper layer follows the IPv6 header directly is looked at.
func quoted6(m header.ICMPv6) (flowKey6, bool) {
	in := header.IPv6(m.Body())
	if len(in) < header.IPv6Len+8 || in[0]>>4 != 6 {
		return flowKey6{}, false
	}
	l4 := in[header.IPv6Len:]
	k := flowKey6{src: in.Dst(), dst: in.Src(), proto: in.NextHeader()}
	switch k.proto {
	case header.ProtoTCP, header.ProtoUDP:
		k.sport, k.dport = header.Ports(l4).Dst(), header.Ports(l4).Src()
	case header.ProtoICMPv6:
		if l4[0] != header.ICMPv6EchoRequest && l4[0] != header.ICMPv6EchoReply {
			return k, false
		}
		id := header.ICMPv6(l4).ID()
		k.sport, k.dport = id, id
	default:
		return k, false
	}
	return k, true
}

// linkError6 passes an ICMPv6 error about a packet of link side s's link to the other side,
// translated as translateICMPError translates IPv4's (errorFor6).
func (r *Router) linkError6(i *Interface, s *side, frame []byte, off *netdev.Offload, id uint64, ip header.IPv6) Verdict {
	o := s.peer()
	mac, v, ok := r.out6(i, s.dom, o.dom, frame, off, id, ip, o.key6.src)
	if !ok {
		return v
	}
	for _, out := range o.dom.ifs {
		if out == i {
			continue
		}
		buf := r.transmit(out, frame)
		if buf == nil {
			continue
		}
		setMACs(buf, out, &mac)
		p := header.IPv6(buf[header.EthLen:])
		p.SetHopLimit(p.HopLimit() - 1)
		errorFor6(p, o.key6, o.dom.ip6.addr)
		r.submit(out, buf, off)
	}
	return Done
}

// errorFor6 rewrites an ICMPv6 error (directly after the IPv6 header, as linkError6's are)
// for the side whose arrival tuple is k, in a domain where the router's address is router:
// to k's source, from the router when k was addressed to it (NAT66), else from its sender;
// the quoted packet becomes the one that side sent. The quote's own transport checksum is
// left as it is, as in IPv4.
func errorFor6(p header.IPv6, k flowKey6, router [16]byte) {
	if k.dst == router {
		p.SetSrc(k.dst)
	}
	p.SetDst(k.src)
	m := header.ICMPv6(p[header.IPv6Len : header.IPv6Len+p.PayloadLen()])
	in := header.IPv6(m.Body())
	in.SetSrc(k.src)
	in.SetDst(k.dst)
	l4 := in[header.IPv6Len:]
	if in.NextHeader() == header.ProtoICMPv6 {
		binary.BigEndian.PutUint16(l4[4:], k.sport)
	} else {
		header.Ports(l4).SetSrc(k.sport)
		header.Ports(l4).SetDst(k.dport)
	}
	m.UpdateChecksum(p.Src(), p.Dst())
}
