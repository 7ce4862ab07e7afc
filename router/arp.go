package router

import (
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// maxARPEntries bounds a domain's ARP cache (a big subnet must not let peers grow it at will).
const maxARPEntries = 1024

// arpFrameLen is the size of the ARP frames the router sends, Genode's ARP_PACKET_SIZE: the
// ARP packet padded to Ethernet's 60-byte minimum, and 4 zero bytes where a CRC would go.
const arpFrameLen = 64

// macOrNone is a resolved next-hop MAC; ok is false under use_arp="no", where each copy goes
// to the interface's own MAC.
type macOrNone struct {
	mac header.MAC
	ok  bool
}

// resolve looks up the MAC of hop in domain d.
func (r *Router) resolve(d *domain, hop [4]byte) (macOrNone, bool) {
	if !d.m.UseARP {
		return macOrNone{}, true
	}
	mac, ok := d.arp[hop]
	return macOrNone{mac: mac, ok: true}, ok
}

// handleARP does what Genode's _handle_arp does: it answers requests for the router's address,
// and for any address outside the subnet when the domain has no gateway (the router is
// everybody's next hop there); it passes requests for other hosts of the subnet, and the
// replies to them, on to the domain's other interfaces (the router is a hub); and it learns
// the sender of every reply. use_arp="no" changes none of this: it only keeps the router from
// asking.
func (r *Router) handleARP(i *Interface, d *domain, eth header.Eth, frame []byte, off *netdev.Offload) Verdict {
	if !d.ip.valid {
		return r.drop(d, "Ignore ARP request on unconfigured interface")
	}
	if len(eth.Payload()) < header.ARPLen {
		return r.drop(d, "packet size-guard exceeded")
	}
	a, ok := header.NewARP(eth.Payload())
	if !ok {
		return r.drop(d, "ARP for unknown protocol")
	}
	switch a.Op() {
	case header.ARPRequest:
		t := a.TargetIP()
		switch {
		case d.ip.inSubnet(t) && t == a.SenderIP():
			return r.drop(d, "gratuitous ARP request")
		case t == d.ip.addr:
			r.arpReply(i, eth, a)
		case d.ip.inSubnet(t):
			r.domainBroadcast(i, d, frame, off)
		case d.ip.hasGW:
			return r.drop(d, "leave ARP request up to gateway")
		default:
			r.arpReply(i, eth, a)
		}
	case header.ARPReply:
		ip := a.SenderIP()
		// A known address keeps its entry, as in Genode: the first answer counts until the
		// cache evicts it.
		if _, known := d.arp[ip]; !known {
			if len(d.arp) >= maxARPEntries {
				for old := range d.arp { // evict any one: the cache only saves asking again
					delete(d.arp, old)
					r.unkeepARP(d, old)
					break
				}
			}
			d.arp[ip] = a.SenderMAC()
			r.keepARP(d, ip)
			r.gen++
			r.continueWaiter(d, ip)
		}
		if t := a.TargetIP(); d.ip.inSubnet(t) && t != d.ip.addr {
			r.domainBroadcast(i, d, frame, off)
		}
	default:
		return r.drop(d, "unknown ARP operation")
	}
	return Done
}

// arpReply answers request a in frame eth, received at interface i, with the router's MAC
// there.
func (r *Router) arpReply(i *Interface, eth header.Eth, a header.ARP) {
	b := make([]byte, arpFrameLen)
	e := header.Eth(b)
	e.SetDst(eth.Src())
	e.SetSrc(i.routerMAC)
	e.SetType(header.EtherTypeARP)
	header.PutARP(b[header.EthLen:], header.ARPReply, i.routerMAC, a.TargetIP(), a.SenderMAC(), a.SenderIP())
	r.emit(i, b)
}

// forgetARP drops the ARP entries of a leaving interface i's client MAC from domain d, and
// every entry when i was the domain's last interface, as Genode does.
func (r *Router) forgetARP(d *domain, i *Interface) {
	if len(d.ifs) == 0 {
		r.clearARP(d)
		clear(d.nd)
	} else {
		for ip, mac := range d.arp {
			if mac == i.MAC() {
				delete(d.arp, ip)
				r.unkeepARP(d, ip)
			}
		}
		for ip, mac := range d.nd {
			if mac == i.MAC() {
				delete(d.nd, ip)
			}
		}
	}
	r.gen++ // plans may hold a forgotten MAC
}
