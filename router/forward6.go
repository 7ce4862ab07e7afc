package router

import (
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// Port forwarding for IPv6 (docs/ipv6.md): a <tcp-forward> or <udp-forward> whose to is an
// IPv6 address forwards the TCP or UDP flows to the domain's interface_ipv6 address and
// port, as Genode's forward rules do IPv4's to interface: a link state whose server side is
// to and to_port, NATed where the target domain has <nat> for this one.

// server6 is where the rules send the first packet of a flow with tuple k from domain d:
// the target domain, the server's address and port, and whether the rule makes link
// states. A forward rule comes first for a flow to d's own address, as in Genode's order.
func (d *domain) server6(k *flowKey6) (to *domain, addr [16]byte, port uint16, stateful bool) {
	if k.proto == header.ProtoTCP || k.proto == header.ProtoUDP {
		if f, ok := d.forward6[protoIndex(k.proto)][k.dport]; ok && d.ip6.valid && k.dst == d.ip6.addr {
			port = k.dport
			if f.toPort != 0 {
				port = f.toPort
			}
			return f.to, f.addr6, port, true
		}
	}
	to, _, stateful = d.decide6(k.proto, k.dst, k.dport, true)
	return to, k.dst, k.dport, stateful
}

// forwardPort6 opens the link state of a forward rule for the flow key to the router at
// domain d, and sends the packet through it.
func (r *Router) forwardPort6(i *Interface, d *domain, frame []byte, off *netdev.Offload, id uint64, ip header.IPv6, c *header.IPv6Chain, key *flowKey6, f forwardRule) Verdict {
	port := key.dport
	if f.toPort != 0 {
		port = f.toPort
	}
	if _, v, ok := r.out6(i, d, f.to, frame, off, id, ip, f.addr6); !ok {
		return v
	}
	l, ok := r.newLink6(i, d, f.to, *key, f.addr6, port)
	if !ok {
		return r.drop(d, "link state refused")
	}
	return r.viaLink6(i, &l.sides[0], frame, off, id, ip, c)
}
