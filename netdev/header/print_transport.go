package header

import "strconv"

func appendTCP(b []byte, p []byte, c *LogConfig) []byte {
	if len(p) < TCPLen {
		return truncated(b, "TCP", p)
	}
	ports := Ports(p)
	flags := be.Uint16(p[12:]) // data offset, reserved bits and flags, as Genode reads them
	switch c.TCP {
	case StyleAll:
		b = append(b, "TCP src "...)
		b = strconv.AppendUint(b, uint64(ports.Src()), 10)
		b = append(b, " dst "...)
		b = strconv.AppendUint(b, uint64(ports.Dst()), 10)
		b = append(b, " seqn "...)
		b = strconv.AppendUint(b, uint64(TCPSeq(p)), 10)
		b = append(b, " ackn "...)
		b = strconv.AppendUint(b, uint64(TCPAckNum(p)), 10)
		b = append(b, " doff "...)
		b = strconv.AppendUint(b, uint64(flags>>12), 10)
		b = append(b, " flg "...)
		b = strconv.AppendUint(b, uint64(flags), 10)
		b = append(b, " winsz "...)
		b = strconv.AppendUint(b, uint64(be.Uint16(p[14:])), 10)
		b = append(b, " crc "...)
		b = strconv.AppendUint(b, uint64(be.Uint16(p[TCPChecksumOff:])), 10)
		b = append(b, " urgp "...)
		b = strconv.AppendUint(b, uint64(be.Uint16(p[18:])), 10)
	case StyleDefault:
		b = append(b, "TCP "...)
		b = strconv.AppendUint(b, uint64(ports.Src()), 10)
		b = append(b, " > "...)
		b = strconv.AppendUint(b, uint64(ports.Dst()), 10)
		// Genode's nic_dump stops after "flags '" (its print lost the letters that
		// Tcp_packet::print writes); the letters and the closing quote are Tcp_packet's.
		b = append(b, " flags '"...)
		for i := range len(tcpFlagLetters) {
			if flags&(1<<i) != 0 {
				b = append(b, tcpFlagLetters[i])
			}
		}
		b = append(b, "' "...)
	case StyleName:
		b = append(b, "TCP"...)
	}
	return b
}

// tcpFlagLetters name the flag bits from bit 0 up: FIN, SYN, RST, PSH, ACK, URG, ECE, CWR, NS.
const tcpFlagLetters = "fsrpauecn"

func appendUDP(b []byte, p []byte, c *LogConfig) []byte {
	if len(p) < UDPLen {
		return truncated(b, "UDP", p)
	}
	src, dst := Ports(p).Src(), Ports(p).Dst()
	switch c.UDP {
	case StyleAll:
		b = append(b, "UDP src "...)
		b = strconv.AppendUint(b, uint64(src), 10)
		b = append(b, " dst "...)
		b = strconv.AppendUint(b, uint64(dst), 10)
		b = append(b, " len "...)
		b = strconv.AppendUint(b, uint64(be.Uint16(p[4:])), 10)
		b = append(b, " crc "...)
		b = strconv.AppendUint(b, uint64(be.Uint16(p[UDPChecksumOff:])), 10)
	case StyleDefault:
		b = append(b, "UDP "...)
		b = strconv.AppendUint(b, uint64(src), 10)
		b = append(b, " > "...)
		b = strconv.AppendUint(b, uint64(dst), 10)
		b = append(b, ' ')
	case StyleName:
		b = append(b, "UDP"...)
	}
	// DHCP is whatever goes between the BOOTP ports (Genode's Dhcp_packet::is_dhcp).
	if (src == DHCPClientPort || src == DHCPServerPort) && (dst == DHCPClientPort || dst == DHCPServerPort) {
		b = appendDHCP(c.inner(b), p[UDPLen:], c)
	}
	return b
}

// appendICMPFields appends the fields ICMP and ICMPv6 share in the "all" style: type, code and
// checksum, as Genode prints them for ICMP.
func appendICMPFields(b []byte, name string, typ, code uint8, crc uint16) []byte {
	b = append(b, name...)
	b = append(b, " typ "...)
	b = strconv.AppendUint(b, uint64(typ), 10)
	b = append(b, " cod "...)
	b = strconv.AppendUint(b, uint64(code), 10)
	b = append(b, " crc "...)
	return strconv.AppendUint(b, uint64(crc), 10)
}

func appendICMP(b []byte, p []byte, c *LogConfig) []byte {
	if len(p) < ICMPLen {
		return truncated(b, "ICMP", p)
	}
	m := ICMP(p)
	switch c.ICMP {
	case StyleAll:
		b = appendICMPFields(b, "ICMP", m.Type(), m.Code(), m.Checksum())
		b = append(b, " roh "...)
		b = strconv.AppendUint(b, uint64(be.Uint32(p[4:])), 10)
	case StyleDefault:
		b = append(b, "ICMP "...)
		b = strconv.AppendUint(b, uint64(m.Type()), 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(m.Code()), 10)
	case StyleName:
		b = append(b, "ICMP"...)
	}
	return b
}
