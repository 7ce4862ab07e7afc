package router

import (
	"encoding/binary"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// echoReply answers an ICMP echo request to the router's address, back out of interface i.
func (r *Router) echoReply(i *Interface, frame []byte) {
	ip := header.IPv4(frame[header.EthLen:])
	b := make([]byte, header.EthLen+ip.TotalLen())
	copy(b, frame[:len(b)])
	e := header.Eth(b)
	e.SetDst(header.Eth(frame).Src())
	e.SetSrc(i.routerMAC)
	out := header.IPv4(b[header.EthLen:])
	src, dst := out.Src(), out.Dst()
	out.SetSrc(dst)
	out.SetDst(src)
	m := header.ICMP(out.Payload())
	m.SetChecksum(header.Adjust(m.Checksum(), uint16(header.ICMPEchoRequest)<<8|uint16(m.Code()), uint16(header.ICMPEchoReply)<<8|uint16(m.Code())))
	m[0] = header.ICMPEchoReply
	r.emit(i, b)
}

// sendICMPError answers a packet from interface i with an ICMP destination unreachable of
// code, carrying the packet's IPv4 header and first 8 payload bytes.
func (r *Router) sendICMPError(i *Interface, d *domain, frame []byte, ip header.IPv4, code uint8) {
	quote := ip.HeaderLen() + 8
	if quote > ip.TotalLen() {
		quote = ip.TotalLen()
	}
	n := header.IPv4Len + header.ICMPLen + quote
	b := make([]byte, header.EthLen+n)
	e := header.Eth(b)
	e.SetDst(header.Eth(frame).Src())
	e.SetSrc(i.routerMAC)
	e.SetType(header.EtherTypeIPv4)
	header.PutIPv4(b[header.EthLen:], n, header.ProtoICMP, d.ip.addr, ip.Src())
	m := header.ICMP(b[header.EthLen+header.IPv4Len:])
	m[0], m[1] = header.ICMPDestUnreach, code
	copy(m.Body(), ip[:quote])
	m.UpdateChecksum()
	r.emit(i, b)
}

// icmpError forwards an ICMP destination unreachable about a packet of a link state back to
// the link's other side, with the outer and the embedded headers translated as the link
// translates. An error no link state knows is dropped, as Genode drops it (no <ip> rule
// applies).
func (r *Router) icmpError(i *Interface, d *domain, frame []byte, off *netdev.Offload, id uint64, m header.ICMP) Verdict {
	// The quoted packet is cut after 8 bytes of payload: its total length says nothing.
	inner := m.Body()
	in := header.IPv4(inner)
	if len(in) < header.IPv4Len+8 || in[0]>>4 != 4 || in.HeaderLen() < header.IPv4Len || len(in) < in.HeaderLen()+8 {
		return r.drop(d, "packet size-guard exceeded")
	}
	ihl := in.HeaderLen()
	if header.Checksum(in.Header(), 0) != 0 {
		return r.drop(d, "bad checksum in IP packet embedded in ICMP error")
	}
	l4 := inner[ihl:]
	// The embedded packet went from the router into d; a reply to it would carry the
	// reversed tuple, which is what the link side in d is keyed by.
	key := flowKey{src: in.Dst(), dst: in.Src(), proto: in.Protocol()}
	switch in.Protocol() {
	case header.ProtoTCP, header.ProtoUDP:
		key.sport, key.dport = header.Ports(l4).Dst(), header.Ports(l4).Src()
	case header.ProtoICMP:
		echoID := header.ICMP(l4).ID()
		key.sport, key.dport = echoID, echoID
	}
	s := r.lookup(d, &key)
	if s == nil {
		return r.drop(d, "no link that matches packet embedded in ICMP error")
	}
	o := s.peer()
	if !o.dom.ip.valid {
		return r.drop(d, "target domain has yet no IP config")
	}
	hop, ok := r.nextHop(o.dom, o.key.src)
	if !ok {
		return r.drop(o.dom, "cannot find next hop")
	}
	mac, ok := r.resolve(o.dom, hop)
	if !ok {
		return r.hold(i, d, o.dom, hop, frame, off, id)
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
		translateICMPError(buf[header.EthLen:], o.key, o.dom.ip.addr)
		r.submit(out, buf, off)
	}
	return Done
}

// translateICMPError rewrites an ICMP error for the client side whose arrival tuple is c, in
// a domain where the router's address is router: the outer packet goes to the client, and
// comes from the address the client talked to when that was the router's (a port forward);
// from any other it keeps its sender, as in Genode (a hop on the way reported it). The
// embedded packet becomes the one the client sent.
func translateICMPError(pkt []byte, c flowKey, router [4]byte) {
	ip, _ := header.NewIPv4(pkt) // checked on the received copy
	if c.dst == router {
		ip.SetSrc(c.dst)
	}
	ip.SetDst(c.src)
	m := header.ICMP(ip.Payload())
	in := header.IPv4(m.Body())
	in.SetSrc(c.src)
	in.SetDst(c.dst)
	l4 := m.Body()[in.HeaderLen():]
	if in.Protocol() == header.ProtoICMP {
		binary.BigEndian.PutUint16(l4[4:], c.sport)
	} else {
		header.Ports(l4).SetSrc(c.sport)
		header.Ports(l4).SetDst(c.dport)
	}
	m.UpdateChecksum()
}
