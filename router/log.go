package router

import (
	"net/netip"
	"strconv"

	"github.com/nicstack/nicstack/router/header"
)

func addrPort(a [4]byte, port uint16) string {
	return netip.AddrPortFrom(netip.AddrFrom4(a), port).String()
}

// logPacket logs a frame received ("rcv") or sent ("snd") in domain d as Genode's nic_router
// does under verbose_packets: "[domain] rcv ETH ...". d is nil for a frame from an interface
// without domain ("[?]").
func (r *Router) logPacket(d *domain, dir string, frame []byte) {
	name := "?"
	if d != nil {
		name = d.name
	}
	r.log.Info("[" + name + "] " + dir + " " + genodeFrame(frame))
}

// genodeFrame writes a frame's headers as Genode's print functions of its net library do
// (Ethernet_frame, Arp_packet, Ipv4_packet, Tcp_packet, Udp_packet, Dhcp_packet,
// Icmp_packet), trailing spaces included, so that logs of both routers compare line by line:
//
//	ETH 02:02:02:02:02:01 > 02:02:02:02:02:00 IPV4 10.0.1.2 > 1.2.3.4 TCP 4000 > 80 flags 's'
//
// It stops where the frame is too short for the next header. nic_dump prints frames the same
// way; the two should share this printer.
func genodeFrame(frame []byte) string {
	e, ok := header.NewEth(frame)
	if !ok {
		return "?"
	}
	b := make([]byte, 0, 160)
	b = append(b, "ETH "...)
	b = appendMAC(b, e.Src())
	b = append(b, " > "...)
	b = appendMAC(b, e.Dst())
	b = append(b, ' ')
	switch e.Type() {
	case header.EtherTypeARP:
		// Genode prints only ARP for IPv4 over Ethernet.
		if a, ok := header.NewARP(e.Payload()); ok {
			b = append(b, "ARP "...)
			b = appendMAC(b, a.SenderMAC())
			b = append(b, ' ')
			b = appendIPv4(b, a.SenderIP())
			b = append(b, " > "...)
			b = appendMAC(b, header.MAC(a[18:24]))
			b = append(b, ' ')
			b = appendIPv4(b, a.TargetIP())
			b = append(b, " cmd "...)
			b = strconv.AppendUint(b, uint64(a.Op()), 10)
		}
	case header.EtherTypeIPv4:
		ip, ok := header.NewIPv4(e.Payload())
		if !ok {
			break
		}
		b = append(b, "IPV4 "...)
		b = appendIPv4(b, ip.Src())
		b = append(b, " > "...)
		b = appendIPv4(b, ip.Dst())
		b = append(b, ' ')
		b = appendTransport(b, ip.Protocol(), ip.Payload())
	}
	return string(b)
}

// appendTransport prints the TCP, UDP (with DHCP) or ICMP header in seg.
func appendTransport(b []byte, proto uint8, seg []byte) []byte {
	switch proto {
	case header.ProtoTCP:
		if len(seg) < 20 {
			break
		}
		ports := header.Ports(seg)
		b = append(b, "TCP "...)
		b = strconv.AppendUint(b, uint64(ports.Src()), 10)
		b = append(b, " > "...)
		b = strconv.AppendUint(b, uint64(ports.Dst()), 10)
		b = append(b, " flags '"...)
		// Genode's order: fin syn rst psh ack urg ece cwr ns.
		flags := uint16(seg[12]&1)<<8 | uint16(seg[13])
		for _, f := range [...]struct {
			bit  uint16
			name byte
		}{{0x01, 'f'}, {0x02, 's'}, {0x04, 'r'}, {0x08, 'p'}, {0x10, 'a'}, {0x20, 'u'}, {0x40, 'e'}, {0x80, 'c'}, {0x100, 'n'}} {
			if flags&f.bit != 0 {
				b = append(b, f.name)
			}
		}
		b = append(b, "' "...)
	case header.ProtoUDP:
		if len(seg) < 8 {
			break
		}
		ports := header.Ports(seg)
		b = append(b, "UDP "...)
		b = strconv.AppendUint(b, uint64(ports.Src()), 10)
		b = append(b, " > "...)
		b = strconv.AppendUint(b, uint64(ports.Dst()), 10)
		b = append(b, ' ')
		if isDHCPPort(ports.Src()) && isDHCPPort(ports.Dst()) {
			if m, ok := header.NewDHCP(seg[8:]); ok {
				b = appendDHCP(b, m)
			}
		}
	case header.ProtoICMP:
		if len(seg) < header.ICMPLen {
			break
		}
		m := header.ICMP(seg)
		b = append(b, "ICMP "...)
		b = strconv.AppendUint(b, uint64(m.Type()), 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(m.Code()), 10)
	}
	return b
}

// isDHCPPort: Genode takes a UDP packet between ports 67 and 68 (either way) for DHCP.
func isDHCPPort(p uint16) bool { return p == header.DHCPServerPort || p == header.DHCPClientPort }

var dhcpMessageTypes = [...]string{1: "DISCOVER", 2: "OFFER", 3: "REQUEST", 4: "DECLINE", 5: "ACK", 6: "NAK", 7: "RELEASE", 8: "INFORM"}

// appendDHCP prints "DHCP <message type> <client MAC> > <siaddr>"; without a message type
// option the BOOTP operation takes its place.
func appendDHCP(b []byte, m header.DHCP) []byte {
	b = append(b, "DHCP "...)
	switch t := m.MessageType(); {
	case t != 0 && int(t) < len(dhcpMessageTypes):
		b = append(b, dhcpMessageTypes[t]...)
	case t != 0:
		b = append(b, '?')
	case m.Op() == 1:
		b = append(b, "REQUEST"...)
	case m.Op() == 2:
		b = append(b, "REPLY"...)
	default:
		b = append(b, '?')
	}
	b = append(b, ' ')
	b = appendMAC(b, m.ClientMAC())
	b = append(b, " > "...)
	return appendIPv4(b, m.SIAddr())
}

func appendMAC(b []byte, m header.MAC) []byte {
	const hex = "0123456789abcdef"
	for k, x := range m {
		if k > 0 {
			b = append(b, ':')
		}
		b = append(b, hex[x>>4], hex[x&15])
	}
	return b
}

func appendIPv4(b []byte, a [4]byte) []byte { return netip.AddrFrom4(a).AppendTo(b) }
