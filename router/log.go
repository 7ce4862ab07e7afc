package router

import (
	"net/netip"

	"github.com/nicstack/nicstack/netdev/header"
)

func addrPort(a [4]byte, port uint16) string {
	return netip.AddrPortFrom(netip.AddrFrom4(a), port).String()
}

func addrPort6(a [16]byte, port uint16) string {
	return netip.AddrPortFrom(netip.AddrFrom16(a), port).String()
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

// genodeFrame writes a frame's headers as Genode's net library prints them, with nic_dump's
// printer (header.NetPrint), so that logs of both routers compare line by line:
//
//	ETH 02:02:02:02:02:01 > 02:02:02:02:02:00 IPV4 10.0.1.2 > 1.2.3.4 TCP 4000 > 80 flags 's'
func genodeFrame(frame []byte) string {
	return string(header.AppendFrame(make([]byte, 0, 160), frame, &header.NetPrint))
}

// isDHCPPort: Genode takes a UDP packet between ports 67 and 68 (either way) for DHCP.
func isDHCPPort(p uint16) bool { return p == header.DHCPServerPort || p == header.DHCPClientPort }
