package router

import (
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/router/header"
)

// maxHeldPerInterface bounds the frames one interface can have waiting for ARP replies, so a
// client cannot pin the router's memory or its own whole buffer by sending to dead addresses.
const maxHeldPerInterface = 64

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

// waiter is a frame held until an ARP reply for ip arrives in dom.
type waiter struct {
	from     *Interface
	src      *domain
	dom      *domain
	ip       [4]byte
	frame    []byte
	off      netdev.Offload
	id       uint64
	deadline int64 // UnixNano
}

// resolve looks up the MAC of hop in domain d.
func (r *Router) resolve(d *domain, hop [4]byte) (macOrNone, bool) {
	if !d.m.UseARP {
		return macOrNone{}, true
	}
	mac, ok := d.arp[hop]
	return macOrNone{mac: mac, ok: true}, ok
}

// hold keeps the frame (unacknowledged) until hop's MAC is known in d, asking for it once per
// ARP timeout.
func (r *Router) hold(i *Interface, src, d *domain, hop [4]byte, frame []byte, off *netdev.Offload, id uint64) Verdict {
	if len(d.ifs) == 0 {
		return r.drop(src, "destination domain has no interface")
	}
	if i.held >= maxHeldPerInterface {
		r.stats.HeldOverflow.add(1)
		return r.drop(src, "too many frames wait for ARP")
	}
	i.held++
	r.waiters = append(r.waiters, waiter{from: i, src: src, dom: d, ip: hop, frame: frame, off: *off, id: id,
		deadline: r.now.Add(r.cfg.ARPRequestTimeout).UnixNano()})
	if _, asked := d.arpAsked[hop]; !asked {
		d.arpAsked[hop] = r.now.Add(r.cfg.ARPRequestTimeout)
		for _, o := range d.ifs {
			b := make([]byte, arpFrameLen)
			e := header.Eth(b)
			e.SetDst(header.Broadcast)
			e.SetSrc(o.routerMAC)
			e.SetType(header.EtherTypeARP)
			header.PutARP(b[header.EthLen:], header.ARPRequest, o.routerMAC, d.ip.addr, header.Broadcast, hop)
			r.emit(o, b)
		}
	}
	return Held
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
					break
				}
			}
			d.arp[ip] = a.SenderMAC()
			r.gen++
			delete(d.arpAsked, ip)
			r.continueWaiters(d, ip)
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
		clear(d.arp)
	} else {
		for ip, mac := range d.arp {
			if mac == i.MAC() {
				delete(d.arp, ip)
			}
		}
	}
	r.gen++ // plans may hold a forgotten MAC
}

// continueWaiters routes again every frame that waited for ip in d.
func (r *Router) continueWaiters(d *domain, ip [4]byte) {
	var ready []waiter
	kept := r.waiters[:0]
	for _, w := range r.waiters {
		if w.dom == d && w.ip == ip {
			ready = append(ready, w)
		} else {
			kept = append(kept, w)
		}
	}
	clear(r.waiters[len(kept):])
	r.waiters = kept
	for _, w := range ready {
		w.from.held--
		if r.handle(w.from, w.frame, &w.off, w.id) == Done {
			w.from.port.Release(w.id)
		}
	}
}

// expireWaiters drops held frames whose ARP request timed out.
func (r *Router) expireWaiters() {
	now := r.now.UnixNano()
	kept := r.waiters[:0]
	var late []waiter
	for _, w := range r.waiters {
		if now >= w.deadline {
			late = append(late, w)
		} else {
			kept = append(kept, w)
		}
	}
	clear(r.waiters[len(kept):])
	r.waiters = kept
	for _, w := range late {
		w.from.held--
		r.stats.ARPTimeouts.add(1)
		r.drop(w.src, "no ARP reply")
		w.from.port.Release(w.id)
	}
}
