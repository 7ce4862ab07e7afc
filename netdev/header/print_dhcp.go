package header

import "strconv"

func appendDHCP(b []byte, p []byte, c *LogConfig) []byte {
	if len(p) < dhcpOptionsFrom {
		return truncated(b, "DHCP", p)
	}
	d := DHCP(p) // with or without the magic cookie: Genode prints either
	switch {
	case c.netPrint:
		return appendDHCPPrint(b, d)
	case c.DHCP == StyleAll:
		b = append(b, "DHCP op "...)
		b = strconv.AppendUint(b, uint64(d.Op()), 10)
		b = append(b, " htyp "...)
		b = strconv.AppendUint(b, uint64(p[1]), 10)
		b = append(b, " hlen "...)
		b = strconv.AppendUint(b, uint64(p[2]), 10)
		b = append(b, " hps "...)
		b = strconv.AppendUint(b, uint64(p[3]), 10)
		b = append(b, " xid "...)
		b = strconv.AppendUint(b, uint64(d.XID()), 10)
		b = append(b, " sec "...)
		b = strconv.AppendUint(b, uint64(be.Uint16(p[8:])), 10)
		b = append(b, " flg 0x"...)
		b = strconv.AppendUint(b, uint64(be.Uint16(p[10:])), 16)
		for i, name := range []string{" ci ", " yi ", " si ", " gi "} {
			b = append(b, name...)
			b = appendIP(b, [4]byte(p[12+4*i:]))
		}
		b = append(b, " ch "...)
		b = appendMAC(b, d.ClientMAC())
		b = append(b, " srv "...)
		b = appendCString(b, p[dhcpSname:dhcpFile])
		b = append(b, " file "...)
		b = appendCString(b, p[dhcpFile:dhcpMagicAt])
		b = append(b, " mag "...)
		b = strconv.AppendUint(b, uint64(be.Uint32(p[dhcpMagicAt:])), 10)
		b = append(b, " opt"...)
		b = appendDHCPOptions(b, p[dhcpOptionsFrom:])
	case c.DHCP == StyleDefault:
		b = append(b, "DHCP "...)
		b = appendMAC(b, d.ClientMAC())
		b = append(b, " > "...)
		b = appendIP(b, d.SIAddr())
		b = append(b, " cmd "...)
		b = strconv.AppendUint(b, uint64(d.Op()), 10)
	case c.DHCP == StyleName:
		b = append(b, "DHCP"...)
	}
	return b
}

var dhcpMessageTypes = [...]string{DHCPDiscover: "DISCOVER", DHCPOffer: "OFFER", DHCPRequest: "REQUEST", DHCPDecline: "DECLINE", DHCPAck: "ACK", DHCPNak: "NAK", DHCPRelease: "RELEASE", DHCPInform: "INFORM"}

// appendDHCPPrint writes "DHCP <message type> <client MAC> > <siaddr>" as Genode's
// Dhcp_packet::print does; without a message type option, the BOOTP operation takes its
// place, named as Genode names it (1 "REPLY", 2 "REQUEST": its names, swapped).
func appendDHCPPrint(b []byte, d DHCP) []byte {
	b = append(b, "DHCP "...)
	switch t := dhcpMessageType(d[dhcpOptionsFrom:]); {
	case t != 0 && int(t) < len(dhcpMessageTypes):
		b = append(b, dhcpMessageTypes[t]...)
	case t != 0:
		b = append(b, '?')
	case d.Op() == 1:
		b = append(b, "REPLY"...)
	case d.Op() == 2:
		b = append(b, "REQUEST"...)
	default:
		b = append(b, '?')
	}
	b = append(b, ' ')
	b = appendMAC(b, d.ClientMAC())
	b = append(b, " > "...)
	return appendIP(b, d.SIAddr())
}

// dhcpMessageType is the value of option 53 in opts, 0 when there is none. It is not
// DHCP.MessageType: Genode's print ends the options at a pad, as at the end option.
func dhcpMessageType(opts []byte) uint8 {
	for len(opts) >= 2 && opts[0] != OptPad && opts[0] != OptEnd {
		n := 2 + int(opts[1])
		if n > len(opts) {
			break
		}
		if opts[0] == OptMessageType && opts[1] == 1 {
			return opts[2]
		}
		opts = opts[n:]
	}
	return 0
}

// appendDHCPOptions writes each option as code:len:value in hex, Genode's way, up to the end
// (or pad) option; an option running past the packet ends the list with "truncated".
func appendDHCPOptions(b []byte, p []byte) []byte {
	for len(p) > 0 && p[0] != OptPad && p[0] != OptEnd {
		if len(p) < 2 || len(p) < 2+int(p[1]) {
			return append(b, " truncated"...)
		}
		code, value := p[0], p[2:2+int(p[1])]
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(code), 10)
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(len(value)), 10)
		if len(value) > 0 {
			b = append(b, ':')
			for _, x := range value {
				b = append(b, hexDigits[x>>4], hexDigits[x&0xf])
			}
		}
		p = p[2+len(value):]
	}
	return b
}

// appendCString writes a NUL-terminated field, every byte that is not printable ASCII as a
// dot: a frame's bytes never break the log line.
func appendCString(b []byte, f []byte) []byte {
	for _, x := range f {
		if x == 0 {
			break
		}
		if x < 0x20 || x > 0x7e {
			x = '.'
		}
		b = append(b, x)
	}
	return b
}
