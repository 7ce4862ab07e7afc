package router

import (
	"fmt"
	"net/netip"

	"github.com/nicstack/nicstack/router/header"
)

func addrPort(a [4]byte, port uint16) string {
	return netip.AddrPortFrom(netip.AddrFrom4(a), port).String()
}

// logPacket logs the main header fields of a frame (verbose_packets).
func (r *Router) logPacket(d *domain, i *Interface, dir string, frame []byte) {
	e := header.Eth(frame)
	attrs := []any{"domain", d.name, "interface", i.label, "dir", dir, "eth", fmt.Sprintf("%s > %s", e.Src(), e.Dst())}
	switch e.Type() {
	case header.EtherTypeARP:
		if a, ok := header.NewARP(e.Payload()); ok {
			attrs = append(attrs, "arp", fmt.Sprintf("op %d %s asks %s", a.Op(), netip.AddrFrom4(a.SenderIP()), netip.AddrFrom4(a.TargetIP())))
		}
	case header.EtherTypeIPv4:
		if ip, ok := header.NewIPv4(e.Payload()); ok {
			attrs = append(attrs, "ipv4", fmt.Sprintf("%s > %s proto %d len %d", netip.AddrFrom4(ip.Src()), netip.AddrFrom4(ip.Dst()), ip.Protocol(), ip.TotalLen()))
			if seg, ok := header.L4Header(ip); ok {
				attrs = append(attrs, "ports", fmt.Sprintf("%d > %d", header.Ports(seg).Src(), header.Ports(seg).Dst()))
			} else if ip.Protocol() == header.ProtoICMP && len(ip.Payload()) >= header.ICMPLen {
				m := header.ICMP(ip.Payload())
				attrs = append(attrs, "icmp", fmt.Sprintf("type %d code %d id %d", m.Type(), m.Code(), m.ID()))
			}
		}
	}
	r.log.Info("packet", attrs...)
}
