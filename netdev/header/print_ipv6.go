// IPv6, its extension headers, ICMPv6 and NDP in the frame printer. Genode prints no IPv6, so
// these lines are ours, in the style of its IPv4 and ICMP lines:
//
//	IPV6 2001:db8::1 > 2001:db8::2  ICMP6 echo request id 1 seq 2

package header

import (
	"net/netip"
	"strconv"
)

func appendIPv6(b []byte, p []byte, c *LogConfig) []byte {
	if len(p) < IPv6Len {
		return truncated(b, "IPV6", p)
	}
	ip := IPv6(p)
	// Ethernet padding is not the packet's; a frame cut short keeps what it has.
	if n := IPv6Len + ip.PayloadLen(); n > IPv6Len && n < len(p) {
		ip = ip[:n]
	}
	switch c.IPv6 {
	case StyleAll:
		b = append(b, "IPV6 ver "...)
		b = strconv.AppendUint(b, uint64(p[0]>>4), 10)
		b = append(b, " tc "...)
		b = strconv.AppendUint(b, uint64(ip.TrafficClass()), 10)
		b = append(b, " flow "...)
		b = strconv.AppendUint(b, uint64(ip.FlowLabel()), 10)
		b = append(b, " len "...)
		b = strconv.AppendUint(b, uint64(ip.PayloadLen()), 10)
		b = append(b, " nxt "...)
		b = strconv.AppendUint(b, uint64(ip.NextHeader()), 10)
		b = append(b, " hlim "...)
		b = strconv.AppendUint(b, uint64(ip.HopLimit()), 10)
		b = append(b, " src "...)
		b = appendIPv6Addr(b, ip.Src())
		b = append(b, " dst "...)
		b = appendIPv6Addr(b, ip.Dst())
	case StyleDefault:
		b = append(b, "IPV6 "...)
		b = appendIPv6Addr(b, ip.Src())
		b = append(b, " > "...)
		b = appendIPv6Addr(b, ip.Dst())
	case StyleName:
		b = append(b, "IPV6"...)
	}
	chain := NewIPv6Chain(ip)
	for {
		e, ok := chain.Next()
		if !ok {
			break
		}
		if c.IPv6 >= StyleDefault {
			b = appendIPv6Ext(b, ip, e)
		}
	}
	if c.IPv6 >= StyleDefault {
		switch {
		case chain.Drop != ChainOK:
			b = append(b, " bad chain ("...)
			b = append(b, chain.Drop.String()...)
			b = append(b, ')')
		case chain.Proto == ProtoESP && chain.Frag.Offset == 0:
			b = append(b, " ESP"...)
		case chain.Proto == ProtoNoNext && chain.Frag.Offset == 0:
			b = append(b, " no next header"...)
		}
		if c.IPv6 == StyleDefault {
			b = append(b, ' ')
		}
	}
	// Only a first fragment (or none) starts with the upper layer's header.
	if chain.Drop != ChainOK || chain.Frag.Offset != 0 {
		return b
	}
	data := ip[chain.Offset:]
	switch chain.Proto {
	case ProtoTCP:
		b = appendTCP(c.inner(b), data, c)
	case ProtoUDP:
		b = appendUDP(c.inner(b), data, c)
	case ProtoICMPv6:
		b = appendICMP6(c.inner(b), ip, data, c)
	}
	return b
}

// appendIPv6Ext writes one extension header: its name and what the router reads of it.
func appendIPv6Ext(b []byte, ip IPv6, e IPv6Ext) []byte {
	h := ip[e.Off : e.Off+e.Len]
	switch e.Type {
	case ProtoHopByHop:
		b = append(b, " HBH"...)
	case ProtoDstOpts:
		b = append(b, " DSTOPT"...)
	case ProtoAH:
		b = append(b, " AH"...)
	case ProtoRouting:
		b = append(b, " RT typ "...)
		b = strconv.AppendUint(b, uint64(h[2]), 10)
		b = append(b, " left "...)
		b = strconv.AppendUint(b, uint64(h[3]), 10)
	case ProtoFragment:
		v := be.Uint16(h[2:])
		b = append(b, " FRAG off "...)
		b = strconv.AppendUint(b, uint64(v&^7), 10)
		b = append(b, " id "...)
		b = strconv.AppendUint(b, uint64(be.Uint32(h[4:])), 10)
		if v&1 != 0 {
			b = append(b, " more"...)
		}
	}
	return b
}

// appendIPv6Addr writes an address in RFC 5952's form, as net/netip does.
func appendIPv6Addr(b []byte, a [16]byte) []byte { return netip.AddrFrom16(a).AppendTo(b) }

var icmp6Names = [...]string{
	ICMPv6DestUnreach:  "unreachable",
	ICMPv6PacketTooBig: "packet too big",
	ICMPv6TimeExceeded: "time exceeded",
	ICMPv6ParamProblem: "parameter problem",
	ICMPv6EchoRequest:  "echo request",
	ICMPv6EchoReply:    "echo reply",
	NDPRouterSolicit:   "router solicitation",
	NDPRouterAdvert:    "router advertisement",
	NDPNeighborSolicit: "neighbor solicitation",
	NDPNeighborAdvert:  "neighbor advertisement",
	NDPRedirect:        "redirect",
}

func appendICMP6(b []byte, ip IPv6, p []byte, c *LogConfig) []byte {
	if len(p) < ICMPv6Len {
		return truncated(b, "ICMP6", p)
	}
	m := ICMPv6(p)
	switch c.ICMP6 {
	case StyleAll:
		b = appendICMPFields(b, "ICMP6", m.Type(), m.Code(), m.Checksum())
		if !m.ChecksumValid(ip.Src(), ip.Dst()) {
			b = append(b, " (bad)"...)
		}
		b = append(b, ' ')
		b = appendICMP6Message(b, m)
	case StyleDefault:
		b = append(b, "ICMP6 "...)
		b = appendICMP6Message(b, m)
	case StyleName:
		b = append(b, "ICMP6"...)
	}
	return b
}

// appendICMP6Message writes a message's name and its main fields, for NDP its options.
func appendICMP6Message(b []byte, m ICMPv6) []byte {
	var name string
	if int(m.Type()) < len(icmp6Names) {
		name = icmp6Names[m.Type()]
	}
	if name == "" {
		b = append(b, "type "...)
		b = strconv.AppendUint(b, uint64(m.Type()), 10)
		b = append(b, " code "...)
		return strconv.AppendUint(b, uint64(m.Code()), 10)
	}
	b = append(b, name...)
	switch m.Type() {
	case ICMPv6DestUnreach, ICMPv6TimeExceeded, ICMPv6ParamProblem:
		b = append(b, " code "...)
		b = strconv.AppendUint(b, uint64(m.Code()), 10)
		if m.Type() == ICMPv6ParamProblem {
			b = append(b, " ptr "...)
			b = strconv.AppendUint(b, uint64(m.Pointer()), 10)
		}
		return b
	case ICMPv6PacketTooBig:
		b = append(b, " mtu "...)
		return strconv.AppendUint(b, uint64(m.MTU()), 10)
	case ICMPv6EchoRequest, ICMPv6EchoReply:
		b = append(b, " id "...)
		b = strconv.AppendUint(b, uint64(m.ID()), 10)
		b = append(b, " seq "...)
		return strconv.AppendUint(b, uint64(m.Seq()), 10)
	}
	n, ok := NewNDP(m)
	if !ok {
		return truncated(append(b, ' '), "NDP", m)
	}
	switch n.Type() {
	case NDPRouterAdvert:
		b = append(b, " hlim "...)
		b = strconv.AppendUint(b, uint64(n.CurHopLimit()), 10)
		b = append(b, " flags '"...)
		b = appendFlags(b, n.RAFlags(), RAManaged, 'M', RAOther, 'O')
		b = append(b, "' lifetime "...)
		b = strconv.AppendUint(b, uint64(n.RouterLifetime()), 10)
		b = append(b, " reachable "...)
		b = strconv.AppendUint(b, uint64(n.ReachableTime()), 10)
		b = append(b, " retrans "...)
		b = strconv.AppendUint(b, uint64(n.RetransTimer()), 10)
	case NDPNeighborSolicit:
		b = append(b, " target "...)
		b = appendIPv6Addr(b, n.Target())
	case NDPNeighborAdvert:
		b = append(b, " target "...)
		b = appendIPv6Addr(b, n.Target())
		b = append(b, " flags '"...)
		b = appendFlags(b, n.NAFlags(), NARouter, 'R', NASolicit, 'S', NAOverride, 'O')
		b = append(b, '\'')
	case NDPRedirect:
		b = append(b, " target "...)
		b = appendIPv6Addr(b, n.Target())
		b = append(b, " dst "...)
		b = appendIPv6Addr(b, n.RedirectDst())
	}
	return appendNDPOptions(b, n.Options())
}

// appendFlags writes the letter of each flag set in v, given as flag and letter pairs.
func appendFlags(b []byte, v uint8, pairs ...uint8) []byte {
	for i := 0; i+1 < len(pairs); i += 2 {
		if v&pairs[i] != 0 {
			b = append(b, pairs[i+1])
		}
	}
	return b
}

// appendNDPOptions writes the options the router reads; an option of length 0 or running past
// the message ends the list with "bad option".
func appendNDPOptions(b []byte, l NDPOptions) []byte {
	for len(l) > 0 {
		o, rest, ok := l.Next()
		if !ok {
			return append(b, " bad option"...)
		}
		l = rest
		switch o.Type() {
		case NDPOptSourceLinkAddr, NDPOptTargetLinkAddr:
			if o.Type() == NDPOptSourceLinkAddr {
				b = append(b, " sll "...)
			} else {
				b = append(b, " tll "...)
			}
			if m, ok := o.LinkAddr(); ok {
				b = appendMAC(b, m)
			} else {
				b = append(b, '?')
			}
		case NDPOptPrefixInfo:
			p, ok := o.Prefix()
			if !ok {
				b = append(b, " prefix ?"...)
				continue
			}
			b = append(b, " prefix "...)
			b = appendIPv6Addr(b, p.Prefix)
			b = append(b, '/')
			b = strconv.AppendUint(b, uint64(p.Len), 10)
			b = append(b, " flags '"...)
			b = appendFlags(b, p.Flags, PrefixL, 'L', PrefixA, 'A')
			b = append(b, "' valid "...)
			b = strconv.AppendUint(b, uint64(p.Valid), 10)
			b = append(b, " preferred "...)
			b = strconv.AppendUint(b, uint64(p.Preferred), 10)
		case NDPOptMTU:
			b = append(b, " mtu "...)
			if mtu, ok := o.MTU(); ok {
				b = strconv.AppendUint(b, uint64(mtu), 10)
			} else {
				b = append(b, '?')
			}
		case NDPOptRDNSS:
			b = append(b, " rdnss"...)
			lifetime, n, ok := o.RDNSS()
			if !ok {
				b = append(b, " ?"...)
				continue
			}
			for i := range n {
				b = append(b, ' ')
				b = appendIPv6Addr(b, o.RDNSSAddr(i))
			}
			b = append(b, " lifetime "...)
			b = strconv.AppendUint(b, uint64(lifetime), 10)
		default:
			b = append(b, " opt "...)
			b = strconv.AppendUint(b, uint64(o.Type()), 10)
		}
	}
	return b
}
