package router

import (
	"net/netip"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// Neighbor discovery (RFC 4861) is to IPv6 what ARP is to IPv4, and the router does it as it
// does ARP: a neighbour cache per domain, bounded as the ARP cache is (maxARPEntries), frames
// held in waiters while a neighbour solicitation asks (arp_request_timeout_sec, as ARP's),
// and the hub passing on what is for others. use_arp="no" keeps the router from asking here
// too.

// handleNDP handles an NDP message from interface i: every one must pass header.CheckNDP
// (hop limit 255, code, checksum, options, DAD's rules). Router solicitations get an RA;
// RAs and redirects from a guest are dropped and counted, not passed on (the router is the
// domain's router: RA guard, RFC 6105); solicitations for the router's addresses are
// answered, and those of another node's DAD for them are a duplicate during the router's
// own DAD and defended after it; advertisements teach the cache what it waits for or knows.
func (r *Router) handleNDP(i *Interface, d *domain, frame []byte, off *netdev.Offload, ip header.IPv6, c *header.IPv6Chain) Verdict {
	if err := header.CheckNDP(ip, c); err != nil {
		if d.m.VerbosePacketDrop {
			r.log.Info("[" + d.name + "] " + err.Error())
		}
		return r.drop6(d, Drop6NDPInvalid)
	}
	n := header.NDP(ip[c.Offset:])
	src, dst := ip.Src(), ip.Dst()
	switch n.Type() {
	case header.NDPRouterSolicit:
		if d.m.RA == nil {
			return r.drop(d, "router solicitation without <ra>")
		}
		r.solicitedRA(i, d, header.Eth(frame).Src(), src)
	case header.NDPRouterAdvert:
		if d.slaac != nil {
			return r.slaacRA(i, d, ip, n)
		}
		return r.drop6(d, Drop6FromGuest)
	case header.NDPRedirect:
		return r.drop6(d, Drop6FromGuest)
	case header.NDPNeighborSolicit:
		t := n.Target()
		switch {
		case !routerAddr6(i, d, t):
			r.domainBroadcast(i, d, frame, off)
		case header.IsUnspecified6(src):
			if !r.duplicate(i, d, t) && own6(i, d, t) {
				// RFC 4862 5.4.3: a node's DAD for the router's address is answered to all.
				r.advertise(i, t, header.AllNodes, header.MulticastMAC(header.AllNodes), header.NARouter|header.NAOverride)
			}
		case own6(i, d, t):
			if o, ok := n.Options().Find(header.NDPOptSourceLinkAddr); ok {
				if mac, ok := o.LinkAddr(); ok {
					r.learn6(d, src, mac, true)
				}
			}
			r.advertise(i, t, src, header.Eth(frame).Src(), header.NARouter|header.NASolicit|header.NAOverride)
		default:
			return r.drop(d, "solicitation for a duplicate address of the router")
		}
	case header.NDPNeighborAdvert:
		t := n.Target()
		if routerAddr6(i, d, t) {
			if !r.duplicate(i, d, t) {
				r.log.Warn("IPv6 address of the router advertised by another node", "domain", d.name,
					"interface", i.label, "address", netip.AddrFrom16(t), "mac", header.Eth(frame).Src())
			}
			return r.drop(d, "advertisement for an address of the router")
		}
		if o, ok := n.Options().Find(header.NDPOptTargetLinkAddr); ok {
			if mac, ok := o.LinkAddr(); ok {
				r.learn6(d, t, mac, false)
			}
		}
		if !own6(i, d, dst) {
			r.domainBroadcast(i, d, frame, off)
		}
	}
	return Done
}

// routerAddr6 reports whether a is an address of the router at i, in use or found taken.
func routerAddr6(i *Interface, d *domain, a [16]byte) bool {
	return a == i.ll || d.ip6.valid && a == d.ip6.addr
}

// duplicate marks the router's address a at i as taken when its DAD still listens, and
// reports whether it did.
func (r *Router) duplicate(i *Interface, d *domain, a [16]byte) bool {
	switch {
	case a == i.ll && r.nowNs < i.llDAD:
		i.llDup = true
	case a == d.ip6.addr && r.nowNs < d.ip6.dad:
		d.ip6.dup = true
	default:
		return false
	}
	r.log.Warn("IPv6 duplicate address, not used", "domain", d.name, "interface", i.label, "address", netip.AddrFrom16(a))
	return true
}

// ndpFrameLen bounds the NS and NA the router sends: the fixed part and one link-layer
// address option.
const ndpFrameLen = header.EthLen + header.IPv6Len + 24 + 8

// sendNDP sends the NDP packet pkt, built in b after the Ethernet header, out of i to dst.
func (r *Router) sendNDP(i *Interface, dst header.MAC, b []byte, pkt header.IPv6) {
	e := header.Eth(b)
	e.SetDst(dst)
	e.SetSrc(i.routerMAC)
	e.SetType(header.EtherTypeIPv6)
	r.emit(i, b[:header.EthLen+len(pkt)])
}

// advertise sends a neighbour advertisement for the router's address target out of i.
func (r *Router) advertise(i *Interface, target, dst [16]byte, dstMAC header.MAC, flags uint8) {
	b := make([]byte, ndpFrameLen)
	w := header.StartNA(b[header.EthLen:], target, dst, target, flags)
	w.LinkAddr(header.NDPOptTargetLinkAddr, i.routerMAC)
	r.sendNDP(i, dstMAC, b, w.Finish())
}

// solicitDAD sends DAD's neighbour solicitation for the router's address a out of i: from
// the unspecified address, to a's solicited-node group (RFC 4862 5.4.2).
func (r *Router) solicitDAD(i *Interface, a [16]byte) {
	b := make([]byte, ndpFrameLen)
	g := header.SolicitedNode(a)
	w := header.StartNS(b[header.EthLen:], [16]byte{}, g, a)
	r.sendNDP(i, header.MulticastMAC(g), b, w.Finish())
}

// solicit asks for the MAC of hop out of i, to its solicited-node group.
func (r *Router) solicit(i *Interface, d *domain, hop [16]byte) {
	b := make([]byte, ndpFrameLen)
	g := header.SolicitedNode(hop)
	w := header.StartNS(b[header.EthLen:], src6(i, d), g, hop)
	w.LinkAddr(header.NDPOptSourceLinkAddr, i.routerMAC)
	r.sendNDP(i, header.MulticastMAC(g), b, w.Finish())
}

// resolve6 looks up the MAC of hop in domain d's neighbour cache.
func (r *Router) resolve6(d *domain, hop [16]byte) (macOrNone, bool) {
	if !d.m.UseARP {
		return macOrNone{}, true
	}
	mac, ok := d.nd[hop]
	return macOrNone{mac: mac, ok: true}, ok
}

// learn6 records mac for ip in d's neighbour cache. An entry the cache has is updated; a new
// one is made only when create (a solicitation to the router) or when frames wait for it
// (RFC 4861 7.2.5: an unsolicited advertisement makes no entry). A full cache evicts any
// one entry, as the ARP cache does. Frames waiting for ip go on.
func (r *Router) learn6(d *domain, ip [16]byte, mac header.MAC, create bool) {
	if _, known := d.nd[ip]; !known {
		if !create && d.waiters6[ip] == nil {
			return
		}
		if len(d.nd) >= maxARPEntries {
			for old := range d.nd {
				delete(d.nd, old)
				r.stats.NeighborEvictions.add(1)
				break
			}
		}
	}
	d.nd[ip] = mac
	if w := d.waiters6[ip]; w != nil {
		r.rehandle(w)
	}
}

// hold6 is hold for IPv6: the frame waits until hop's MAC is known in d, and the first frame
// for hop solicits it on each of d's interfaces.
func (r *Router) hold6(i *Interface, src, d *domain, hop [16]byte, frame []byte, off *netdev.Offload, id uint64) Verdict {
	if len(d.ifs) == 0 {
		return r.drop(src, "destination domain has no interface")
	}
	w := d.waiters6[hop]
	if w == nil {
		w = &arpWaiter{src: i, dom: d, ip6: hop, v6: true, deadline: r.now.Add(r.cfg.ARPRequestTimeout).UnixNano()}
		d.waiters6[hop] = w
		r.waiters = append(r.waiters, w)
		for _, o := range d.ifs {
			r.solicit(o, d, hop)
		}
	}
	return r.keepHeld(w, i, src, frame, off, id)
}
