package router

import (
	"encoding/binary"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// handle routes one frame from interface i (see Handle).
func (r *Router) handle(i *Interface, frame []byte, off *netdev.Offload, id uint64) Verdict {
	d := i.dom
	if d == nil {
		if r.cfg.VerbosePackets && len(frame) >= header.EthLen {
			r.logPacket(nil, "rcv", frame)
		}
		return r.drop(nil, "no domain")
	}
	d.stats.rxBytes += uint64(len(frame))
	if !r.general && r.forwardLinked(i, d, frame, off) {
		return Done
	}
	eth, ok := header.NewEth(frame)
	if !ok {
		return r.drop(d, "packet size-guard exceeded")
	}
	if d.m.VerbosePackets {
		r.logPacket(d, "rcv", frame)
	}
	switch eth.Type() {
	case header.EtherTypeARP:
		return r.handleARP(i, d, eth, frame, off)
	case header.EtherTypeIPv4:
		return r.handleIPv4(i, d, frame, off, id)
	case header.EtherTypeIPv6:
		return r.handleIPv6(i, d, frame, off, id)
	}
	return r.drop(d, "unknown network layer protocol")
}

func (r *Router) handleIPv4(i *Interface, d *domain, frame []byte, off *netdev.Offload, id uint64) Verdict {
	ip, ok := header.NewIPv4(frame[header.EthLen:])
	if !ok {
		return r.drop(d, "bad IPv4 header")
	}
	if ip.Protocol() == header.ProtoUDP && len(ip.Payload()) >= header.UDPLen {
		ports := header.Ports(ip.Payload())
		toRouter := ip.Dst() == [4]byte{255, 255, 255, 255} || (d.ip.valid && ip.Dst() == d.ip.addr)
		if ports.Dst() == header.DHCPServerPort && d.dhcpServer != nil && toRouter {
			r.serveDHCP(i, d, ip)
			return Done
		}
		if ports.Dst() == header.DHCPClientPort && d.dhcpClient != nil {
			d.dhcpClient.receive(r, d, i, ip)
			return Done
		}
	}
	if !d.ip.valid {
		return r.drop(d, "domain has no IPv4 config yet")
	}
	if ip.Fragmented() {
		r.stats.FragmentsSeen.add(1)
		i.counts.droppedFragmIPv4++
		if r.cfg.ICMPType3CodeOnFragm >= 0 {
			r.sendICMPError(i, d, frame, ip, uint8(r.cfg.ICMPType3CodeOnFragm))
		}
		return r.drop(d, "fragmented IPv4 not supported")
	}
	src, dst := ip.Src(), ip.Dst()

	// 1. Domain-local traffic, the subnet's broadcast included: the router is a hub within
	// the domain.
	if d.ip.inSubnet(dst) && dst != d.ip.addr {
		r.domainBroadcast(i, d, frame, off)
		return Done
	}
	switch ip.Protocol() {
	case header.ProtoTCP, header.ProtoUDP:
		seg, ok := header.L4Header(ip)
		if !ok {
			return r.drop(d, "packet size-guard exceeded")
		}
		ports := header.Ports(seg)
		// Genode never routes DHCP (UDP between ports 67 and 68 either way): what its DHCP
		// server or client did not take, it drops.
		if ip.Protocol() == header.ProtoUDP && isDHCPPort(ports.Src()) && isDHCPPort(ports.Dst()) {
			return r.dropDHCP(d, seg)
		}
		// Field by field: a composite literal is built in a temporary and copied as words,
		// which waits for its narrow stores (no store-to-load forwarding).
		var key flowKey
		key.src, key.dst = src, dst
		key.sport, key.dport, key.proto = ports.Src(), ports.Dst(), ip.Protocol()
		return r.routeFlow(i, d, frame, off, id, &key, seg, true)
	case header.ProtoICMP:
		m := header.ICMP(ip.Payload())
		if len(m) < header.ICMPLen {
			return r.drop(d, "packet size-guard exceeded")
		}
		if header.Checksum(m, 0) != 0 {
			return r.drop(d, "bad ICMP checksum")
		}
		// Genode's ICMP router knows queries (echo) and destination unreachable only.
		switch m.Type() {
		case header.ICMPEchoRequest, header.ICMPEchoReply:
			if dst == d.ip.addr && m.Type() == header.ICMPEchoRequest && d.m.ICMPEchoServer {
				r.echoReply(i, frame)
				return Done
			}
			var key flowKey // field by field, as above
			key.src, key.dst = src, dst
			key.sport, key.dport, key.proto = m.ID(), m.ID(), header.ProtoICMP
			return r.routeFlow(i, d, frame, off, id, &key, nil, m.Type() == header.ICMPEchoRequest)
		case header.ICMPDestUnreach:
			return r.icmpError(i, d, frame, off, id, m)
		default:
			return r.drop(d, "unhandled type in ICMP")
		}
	}
	if to := d.ipRule(dst); to != nil {
		return r.forwardDirect(i, d, to, frame, off, id, dst)
	}
	return r.unroutable(i, d, frame)
}

// unroutable drops a packet no rule routes and answers it with an ICMP host unreachable,
// unless it went to a multicast address (Genode's end of _handle_ip, after RFC 1812
// 4.3.2.7).
func (r *Router) unroutable(i *Interface, d *domain, frame []byte) Verdict {
	ip, _ := header.NewIPv4(frame[header.EthLen:]) // checked by handleIPv4
	if dst := ip.Dst(); dst[0]&0xf0 != 0xe0 {
		r.sendICMPError(i, d, frame, ip, header.ICMPHostUnreachable)
	}
	return r.drop(d, "unroutable")
}

// dropDHCP drops a DHCP message (UDP segment seg) that neither the domain's DHCP server nor
// its client took, with Genode's reason for its BOOTP operation.
func (r *Router) dropDHCP(d *domain, seg []byte) Verdict {
	op := byte(0)
	if len(seg) > header.UDPLen {
		op = header.DHCP(seg[header.UDPLen:]).Op()
	}
	switch op {
	case 1:
		return r.drop(d, "DHCP request while DHCP server inactive")
	case 2:
		return r.drop(d, "DHCP reply while DHCP client inactive")
	}
	return r.drop(d, "Bad DHCP opcode")
}

// routeFlow routes TCP, UDP and ICMP echo: link state first, then the rules that create one
// (when the packet may open one: not an echo reply).
func (r *Router) routeFlow(i *Interface, d *domain, frame []byte, off *netdev.Offload, id uint64, key *flowKey, seg []byte, mayOpen bool) Verdict {
	if s := r.lookup(d, key); s != nil {
		return r.viaLink(i, s, frame, off, id, seg)
	}
	p := protoIndex(key.proto)
	if dec, ok := d.decide(p, key.dst, key.dport); ok && mayOpen {
		if !dec.to.ip.valid {
			return r.drop(d, "target domain has yet no IP config")
		}
		hop, ok := r.nextHop(dec.to, dec.dst)
		if !ok {
			return r.drop(dec.to, "cannot find next hop")
		}
		if _, ok := r.resolve(dec.to, hop); !ok {
			return r.hold(i, d, dec.to, hop, frame, off, id)
		}
		l, ok := r.newLink(i, d, *key, dec)
		if !ok {
			return r.drop(d, "link state refused")
		}
		return r.viaLink(i, &l.sides[0], frame, off, id, seg)
	}
	if to := d.ipRule(key.dst); to != nil {
		return r.forwardDirect(i, d, to, frame, off, id, key.dst)
	}
	return r.unroutable(i, d, frame)
}

// viaLink sends a packet arriving at link side s to the other side, rewritten to the tuple
// the other side expects.
func (r *Router) viaLink(i *Interface, s *side, frame []byte, off *netdev.Offload, id uint64, seg []byte) Verdict {
	o := s.peer()
	to := o.dom
	if s.plan.gen == r.gen {
		r.touch(s, seg)
		r.sendTo(i, to, frame, off, &s.plan.mac, &s.plan.rw)
		return Done
	}
	if !to.ip.valid {
		return r.drop(s.dom, "target domain has yet no IP config")
	}
	hop, ok := r.nextHop(to, o.key.src)
	if !ok {
		return r.drop(to, "cannot find next hop")
	}
	mac, ok := r.resolve(to, hop)
	if !ok {
		return r.hold(i, s.dom, to, hop, frame, off, id)
	}
	r.touch(s, seg)
	s.plan = plan{gen: r.gen, mac: mac, rw: newRewrite(s.key, o.key)}
	r.sendTo(i, to, frame, off, &s.plan.mac, &s.plan.rw)
	return Done
}

// forwardDirect sends a packet to domain to without a link state, changing only Ethernet
// addresses (domain-local traffic and <ip> rules).
func (r *Router) forwardDirect(i *Interface, from, to *domain, frame []byte, off *netdev.Offload, id uint64, dst [4]byte) Verdict {
	if !to.ip.valid {
		return r.drop(from, "target domain has yet no IP config")
	}
	hop, ok := r.nextHop(to, dst)
	if !ok {
		return r.drop(to, "cannot find next hop")
	}
	mac, ok := r.resolve(to, hop)
	if !ok {
		return r.hold(i, from, to, hop, frame, off, id)
	}
	r.sendTo(i, to, frame, off, &mac, nil)
	return Done
}

// domainBroadcast passes a frame from interface i unchanged to every other interface of its
// domain d, as a hub does: no ARP, no rewrite, not even of the Ethernet addresses (Genode's
// _domain_broadcast). With no other interface the frame is simply done.
func (r *Router) domainBroadcast(i *Interface, d *domain, frame []byte, off *netdev.Offload) {
	for _, o := range d.ifs {
		if o == i {
			continue
		}
		if buf := r.transmit(o, frame); buf != nil {
			r.submit(o, buf, off)
		}
	}
}

// nextHop is dst itself in to's subnet, else to's gateway.
func (r *Router) nextHop(to *domain, dst [4]byte) ([4]byte, bool) {
	if to.ip.inSubnet(dst) {
		return dst, true
	}
	return to.ip.gateway, to.ip.hasGW
}

// rewrite is what viaLink changes: the IPv4 addresses and the ports (TCP, UDP) or the echo
// ID (ICMP, taken from sport).
type rewrite struct {
	src, dst     [4]byte
	sport, dport uint16
	// The changes to a packet that arrives with tuple from, as one's complement sums of
	// the old fields inverted and the new ones (RFC 1624): ipSum for the IPv4 header
	// checksum, l4Sum for the TCP or UDP checksum (addresses and ports) or the ICMP one (ID).
	from         flowKey
	ipSum, l4Sum uint16
}

// newRewrite is the rewrite of packets arriving with tuple from at a link side whose other
// side's tuple is to: they leave as packets arriving there would be answered.
func newRewrite(from, to flowKey) rewrite {
	rw := rewrite{src: to.dst, dst: to.src, sport: to.dport, dport: to.sport, from: from}
	ip := header.Diff4(from.src, rw.src) + header.Diff4(from.dst, rw.dst)
	rw.ipSum = header.Fold(ip)
	if from.proto == header.ProtoICMP {
		rw.l4Sum = header.Fold(uint32(^from.sport) + uint32(rw.sport))
	} else {
		rw.l4Sum = header.Fold(ip + uint32(^from.sport) + uint32(rw.sport) + uint32(^from.dport) + uint32(rw.dport))
	}
	return rw
}

// adjustSum applies a change summed by newRewrite to checksum c.
func adjustSum(c, sum uint16) uint16 { return ^header.Fold(uint32(^c) + uint32(sum)) }

// sendTo copies the frame to every interface of domain to but the one it came from and
// rewrites each copy: Ethernet addresses always, the IPv4 and transport header when rw is set.
func (r *Router) sendTo(from *Interface, to *domain, frame []byte, off *netdev.Offload, mac *macOrNone, rw *rewrite) {
	sent := false
	for _, o := range to.ifs {
		if o != from {
			sent = true
			r.copyTo(o, frame, off, mac, rw)
		}
	}
	if !sent {
		r.drop(to, "destination domain has no other interface")
	}
}

// copyTo is sendTo for one interface o.
func (r *Router) copyTo(o *Interface, frame []byte, off *netdev.Offload, mac *macOrNone, rw *rewrite) {
	buf := r.transmit(o, frame)
	if buf == nil {
		return
	}
	eth := header.Eth(buf)
	eth.SetSrc(o.routerMAC)
	if mac.ok {
		eth.SetDst(mac.mac)
	} else {
		eth.SetDst(o.routerMAC) // use_arp="no"
	}
	if ip := header.IPv4(buf[header.EthLen:]); rw != nil &&
		(off.Flags&netdev.OffloadNeedsCsum != 0 || !quickRewrite(ip, ip.HeaderLen(), rw)) {
		rewriteFields(ip, off, rw)
	}
	r.submit(o, buf, off)
}

// rewriteFields rewrites an IPv4 packet in place for rw, field by field, checksums
// incrementally (RFC 1624): sendTo's way where quickRewrite cannot. With checksum offload
// pending (a super-frame or a guest's partial checksum) the transport checksum field holds
// only the pseudo-header sum: addresses are folded into it, ports not.
func rewriteFields(ip header.IPv4, off *netdev.Offload, rw *rewrite) {
	hl := ip.HeaderLen()
	oldSrc, oldDst := ip.Src(), ip.Dst()
	if oldSrc != rw.src {
		ip.SetSrc(rw.src)
	}
	if oldDst != rw.dst {
		ip.SetDst(rw.dst)
	}
	seg := ip[hl:]
	var csumOff int
	switch ip.Protocol() {
	case header.ProtoICMP:
		header.ICMP(seg).SetID(rw.sport)
		return
	case header.ProtoTCP:
		csumOff = header.TCPChecksumOff
	default:
		csumOff = header.UDPChecksumOff
	}
	ports := header.Ports(seg)
	oldSport, oldDport := ports.Src(), ports.Dst()
	ports.SetSrc(rw.sport)
	ports.SetDst(rw.dport)
	c := binary.BigEndian.Uint16(seg[csumOff:])
	partial := off.Flags&netdev.OffloadNeedsCsum != 0
	if ip.Protocol() == header.ProtoUDP && c == 0 && !partial {
		return // UDP without checksum
	}
	if partial {
		c = ^c
	}
	c = header.Adjust4(c, oldSrc, rw.src)
	c = header.Adjust4(c, oldDst, rw.dst)
	if partial {
		c = ^c
	} else {
		c = header.Adjust(c, oldSport, rw.sport)
		c = header.Adjust(c, oldDport, rw.dport)
		if c == 0 && ip.Protocol() == header.ProtoUDP {
			c = 0xffff
		}
	}
	binary.BigEndian.PutUint16(seg[csumOff:], c)
}

// setMACs addresses a copy leaving through interface o to the next hop's MAC (copyTo does
// the same inline, on the hot path).
func setMACs(buf []byte, o *Interface, mac *macOrNone) {
	eth := header.Eth(buf)
	eth.SetSrc(o.routerMAC)
	if mac.ok {
		eth.SetDst(mac.mac)
	} else {
		eth.SetDst(o.routerMAC) // use_arp="no"
	}
}

// quickRewrite is rewriteFields for a packet with complete checksums that carries rw.from
// (viaLink's packets all do; anything else is left to the field-by-field way): it adds the
// summed changes to each checksum once.
func quickRewrite(ip header.IPv4, hl int, rw *rewrite) bool {
	p := ip.Protocol()
	if p != rw.from.proto || ip.Src() != rw.from.src || ip.Dst() != rw.from.dst {
		return false
	}
	seg := ip[hl:]
	switch p {
	case header.ProtoICMP:
		m := header.ICMP(seg)
		if m.ID() != rw.from.sport {
			return false
		}
		binary.BigEndian.PutUint16(m[4:], rw.sport)
		m.SetChecksum(adjustSum(m.Checksum(), rw.l4Sum))
	case header.ProtoTCP, header.ProtoUDP:
		ports := header.Ports(seg)
		if ports.Src() != rw.from.sport || ports.Dst() != rw.from.dport {
			return false
		}
		csumOff := header.UDPChecksumOff
		if p == header.ProtoTCP {
			csumOff = header.TCPChecksumOff
		}
		ports.SetSrc(rw.sport)
		ports.SetDst(rw.dport)
		c := binary.BigEndian.Uint16(seg[csumOff:])
		if p == header.ProtoTCP || c != 0 { // a UDP checksum of 0: none
			c = adjustSum(c, rw.l4Sum)
			if c == 0 && p == header.ProtoUDP {
				c = 0xffff
			}
			binary.BigEndian.PutUint16(seg[csumOff:], c)
		}
	default:
		return false
	}
	copy(ip[12:16], rw.src[:])
	copy(ip[16:20], rw.dst[:])
	ip.SetChecksum(adjustSum(ip.Checksum(), rw.ipSum))
	return true
}
