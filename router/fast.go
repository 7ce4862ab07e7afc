package router

import (
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// forwardLinked is handle's fast path for the frames most traffic consists of: TCP or UDP of
// the link state its domain saw last (domain.last), whose plan is current, to a domain with
// one interface, without packet logging. It routes such a frame exactly as handleIPv4,
// routeFlow and viaLink would, in one function: those nested calls, each of which makes Go
// spill and reload every live register, cost about 7 % of a 64-byte frame's routing
// (BenchmarkRound). It reports false, having changed nothing, for every other frame, which
// handle then routes the general way: ARP, ICMP, DHCP ports, fragments, domain-local traffic,
// other or expired links, stale plans. TestFastPathMatchesGeneral and FuzzRouterFrame check
// that both ways do the same.
func (r *Router) forwardLinked(i *Interface, d *domain, frame []byte, off *netdev.Offload) bool {
	s := d.last
	if s == nil || s.plan.gen != r.gen || d.m.VerbosePackets || len(frame) < header.EthLen {
		return false
	}
	if header.Eth(frame).Type() != header.EtherTypeIPv4 {
		return false
	}
	ip, ok := header.NewIPv4(frame[header.EthLen:])
	if !ok || !d.ip.valid || ip.Fragmented() {
		return false
	}
	p := ip.Protocol()
	if p != s.key.proto {
		return false
	}
	seg, ok := header.L4Header(ip) // refuses anything but TCP and UDP
	if !ok {
		return false
	}
	ports := header.Ports(seg)
	if p == header.ProtoUDP && (ports.Dst() == header.DHCPServerPort || ports.Dst() == header.DHCPClientPort) {
		return false // handleIPv4 may serve it before routing (no link can hold such a tuple today)
	}
	dst := ip.Dst()
	if d.ip.inSubnet(dst) && dst != d.ip.addr {
		return false // domain-local: the router is a hub there
	}
	// Field by field, as lookup compares.
	if s.key.sport != ports.Src() || s.key.dport != ports.Dst() || s.key.src != ip.Src() || s.key.dst != dst || r.expired(s.l) {
		return false
	}
	to := s.peer().dom
	if len(to.ifs) != 1 || to.ifs[0] == i {
		return false
	}
	r.touch(s, seg)
	r.copyTo(to.ifs[0], frame, off, &s.plan.mac, &s.plan.rw)
	return true
}
