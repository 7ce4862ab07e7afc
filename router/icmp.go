package router

import (
	"encoding/binary"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/router/header"
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
	n := 20 + header.ICMPLen + quote
	b := make([]byte, header.EthLen+n)
	e := header.Eth(b)
	e.SetDst(header.Eth(frame).Src())
	e.SetSrc(i.routerMAC)
	e.SetType(header.EtherTypeIPv4)
	header.PutIPv4(b[header.EthLen:], n, header.ProtoICMP, d.ip.addr, ip.Src())
	m := header.ICMP(b[header.EthLen+20:])
	m[0], m[1] = header.ICMPDestUnreach, code
	copy(m.Body(), ip[:quote])
	m.UpdateChecksum()
	r.emit(i, b)
}

// icmpError forwards an ICMP destination unreachable about a packet of a link state back to
// the link's other side, with the outer and the embedded headers translated as the link
// translates. False when no link state knows the embedded packet (the caller goes on with
// <ip> rules).
func (r *Router) icmpError(i *Interface, d *domain, frame []byte, off *netdev.Offload, id uint64, m header.ICMP) (Verdict, bool) {
	inner := m.Body()
	if len(inner) < 28 || inner[0]>>4 != 4 || int(inner[0]&15)*4 < 20 || len(inner) < int(inner[0]&15)*4+8 {
		return 0, false
	}
	ihl := int(inner[0]&15) * 4
	in := header.IPv4(inner)
	l4 := inner[ihl:]
	// The embedded packet went from the router into d; a reply to it would carry the
	// reversed tuple, which is what the link side in d is keyed by.
	key := flowKey{src: in.Dst(), dst: in.Src(), proto: in.Protocol()}
	switch in.Protocol() {
	case header.ProtoTCP, header.ProtoUDP:
		key.sport, key.dport = header.Ports(l4).Dst(), header.Ports(l4).Src()
	case header.ProtoICMP:
		idv := binary.BigEndian.Uint16(l4[4:])
		key.sport, key.dport = idv, idv
	default:
		return 0, false
	}
	s := r.lookup(d, &key)
	if s == nil {
		return 0, false
	}
	o := s.peer()
	if !o.dom.ip.valid {
		return r.drop(d, "destination domain has no IPv4 config"), true
	}
	hop, ok := r.nextHop(o.dom, o.key.src)
	if !ok {
		return r.drop(o.dom, "no gateway for destination"), true
	}
	mac, ok := r.resolve(o.dom, hop)
	if !ok {
		return r.hold(i, d, o.dom, hop, frame, off, id), true
	}
	for _, out := range o.dom.ifs {
		if out == i {
			continue
		}
		buf := r.transmit(out, frame)
		if buf == nil {
			continue
		}
		eth := header.Eth(buf)
		eth.SetSrc(out.routerMAC)
		if mac.ok {
			eth.SetDst(mac.mac)
		} else {
			eth.SetDst(out.routerMAC)
		}
		translateICMPError(buf[header.EthLen:], o.key)
		r.submit(out, buf, off)
	}
	return Done, true
}

// translateICMPError rewrites an ICMP error for the client side whose arrival tuple is c: the
// outer packet goes from the address the client talked to, to the client; the embedded packet
// becomes the one the client sent.
func translateICMPError(pkt []byte, c flowKey) {
	ip, _ := header.NewIPv4(pkt) // checked on the received copy
	ip.SetSrc(c.dst)
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
