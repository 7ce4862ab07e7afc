package nicperf

import (
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// DHCP on a session, as Genode's nic_perf does it: its client (dhcp_client.go) gets the
// session an address when its <interface> has none; its server hands dhcp_client_ip to
// whoever asks, from the session's own address, which it also names as router and DNS
// server. The messages are netdev/header's codec.

// leaseSeconds is the server's lease, Genode's fixed one (as is its /24 subnet).
const leaseSeconds = 86400

var (
	subnetMask     = [4]byte{255, 255, 255, 0}
	limitBroadcast = [4]byte{255, 255, 255, 255}
)

// isDHCP reports whether a UDP datagram goes between the DHCP ports (either way round, as
// Genode's Dhcp_packet::is_dhcp has it).
func isDHCP(ports header.Ports) bool {
	dhcpPort := func(p uint16) bool { return p == header.DHCPServerPort || p == header.DHCPClientPort }
	return dhcpPort(ports.Src()) && dhcpPort(ports.Dst())
}

// receiveDHCP takes a DHCP message: a request for the server, a reply for the client.
func (p *Perf) receiveDHCP(out *packetstream.Source, e header.Eth, payload []byte, now time.Time) {
	msg, ok := header.NewDHCP(payload)
	switch {
	case !ok:
		p.other++
	case msg.Op() == 1:
		p.serveDHCP(out, e, msg)
	case msg.Op() == 2 && p.cfg.DHCP:
		p.other++
		p.dhcp.receive(p, out, e, msg, now)
	default:
		p.other++
	}
}

// serveDHCP answers DISCOVER with an OFFER (to everyone) and REQUEST with an ACK (to the
// asker) of DHCPClientIP, when the session has both addresses; anything else it ignores.
// Like Genode's, the server keeps no leases: it acknowledges any request.
func (p *Perf) serveDHCP(out *packetstream.Source, e header.Eth, req header.DHCP) {
	if p.ip == ([4]byte{}) || p.cfg.DHCPClientIP == ([4]byte{}) {
		p.other++
		return
	}
	typ, dst := uint8(header.DHCPOffer), header.Broadcast
	switch req.MessageType() {
	case header.DHCPDiscover:
	case header.DHCPRequest:
		typ, dst = header.DHCPAck, e.Src()
	default:
		p.other++
		return
	}
	w := header.NewDHCPMessage(2, req.XID(), [4]byte{}, p.cfg.DHCPClientIP, p.ip, req.ClientMAC(), false)
	w.Add(header.OptMessageType, typ)
	w.AddIPv4s(header.OptServerID, p.ip)
	w.AddUint32(header.OptLeaseTime, leaseSeconds)
	w.AddIPv4s(header.OptSubnetMask, subnetMask)
	w.AddIPv4s(header.OptRouter, p.ip)
	w.AddIPv4s(header.OptDNSServer, p.ip)
	w.AddIPv4s(header.OptBroadcast, limitBroadcast)
	if p.sendDHCP(out, dst, p.ip, p.cfg.DHCPClientIP, header.DHCPServerPort, header.DHCPClientPort, w.End()) {
		p.answers++
	}
}

// sendDHCP sends a DHCP message in a UDP datagram; false when the stream is full.
func (p *Perf) sendDHCP(out *packetstream.Source, dstMAC header.MAC, src, dst [4]byte, sport, dport uint16, msg []byte) bool {
	const hdrs = header.EthLen + header.IPv4Len + header.UDPLen
	b := p.alloc(out, hdrs+len(msg))
	if b == nil {
		return false
	}
	copy(b[hdrs:], msg)
	putUDP(b, p.cfg.MAC, dstMAC, src, dst, sport, dport)
	p.submit(out)
	return true
}
