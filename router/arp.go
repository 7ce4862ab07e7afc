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
			b := make([]byte, header.EthLen+header.ARPLen)
			e := header.Eth(b)
			e.SetDst(header.Broadcast)
			e.SetSrc(o.routerMAC)
			e.SetType(header.EtherTypeARP)
			header.PutARP(b[header.EthLen:], header.ARPRequest, o.routerMAC, d.ip.addr, header.MAC{}, hop)
			r.emit(o, b)
		}
	}
	return Held
}

// handleARP answers requests for the router's address (and, in a domain without gateway,
// for any other address: the router is everybody's next hop there) and learns from replies.
func (r *Router) handleARP(i *Interface, d *domain, eth header.Eth) {
	a, ok := header.NewARP(eth.Payload())
	if !ok {
		r.drop(d, "bad ARP packet")
		return
	}
	if !d.ip.valid {
		r.drop(d, "ARP in a domain without IPv4 config")
		return
	}
	switch a.Op() {
	case header.ARPRequest:
		t := a.TargetIP()
		if !d.m.UseARP || t == a.SenderIP() {
			r.drop(d, "ARP request not answered (use_arp=\"no\" or gratuitous)")
			return
		}
		if t != d.ip.addr && d.ip.hasGW {
			r.drop(d, "ARP request for a foreign address in a domain with gateway")
			return
		}
		b := make([]byte, header.EthLen+header.ARPLen)
		e := header.Eth(b)
		e.SetDst(a.SenderMAC())
		e.SetSrc(i.routerMAC)
		e.SetType(header.EtherTypeARP)
		header.PutARP(b[header.EthLen:], header.ARPReply, i.routerMAC, t, a.SenderMAC(), a.SenderIP())
		r.emit(i, b)
	case header.ARPReply:
		ip := a.SenderIP()
		if !d.ip.inSubnet(ip) {
			r.drop(d, "ARP reply from outside the subnet")
			return
		}
		if _, known := d.arp[ip]; !known && len(d.arp) >= maxARPEntries {
			for old := range d.arp { // evict any one: the cache only saves asking again
				delete(d.arp, old)
				break
			}
		}
		d.arp[ip] = a.SenderMAC()
		r.gen++
		delete(d.arpAsked, ip)
		r.continueWaiters(d, ip)
	default:
		r.drop(d, "unknown ARP operation")
	}
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
