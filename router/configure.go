package router

import (
	"github.com/nicstack/nicstack/router/model"
	"github.com/nicstack/nicstack/runtime/config"
)

// Configure applies a new <config>. Problems (unknown attributes, invalid domains and why) are
// logged and returned; the router runs with what is valid. Interfaces are put into domains
// again by the new policies; link states survive when the new rules still route their first
// packet the same way (same destination domain, address, port and NAT); ARP caches, DHCP
// leases and DHCP-client configs of domains that kept their name and addressing are kept.
func (r *Router) Configure(n *config.Node) []error {
	r.setNow()
	r.gen++
	cfg, problems := model.Parse(n)
	for _, p := range problems { // invalid domains among them, each with its reason
		r.log.Warn("config", "problem", p.Error())
	}
	old := r.domains
	r.cfg = cfg
	r.idle = [3]int64{int64(cfg.TCPIdleTimeout), int64(cfg.UDPIdleTimeout), int64(cfg.ICMPIdleTimeout)}
	r.domains = map[string]*domain{}
	for name, m := range cfg.Domains {
		r.domains[name] = newDomain(m)
	}
	for _, d := range r.domains {
		d.resolveRules(r.domains)
		if o := old[d.name]; o != nil {
			d.inherit(o)
		}
	}
	// Links first (they need the old interface-to-domain mapping only through their sides).
	oldLinks := r.links
	r.links = map[*link]struct{}{}
	for l := range oldLinks {
		r.carryOver(l)
	}
	for _, i := range r.ifs {
		i.dom = nil
	}
	for _, i := range r.ifs {
		r.assign(i)
	}
	// Held frames are routed again under the new rules.
	r.rehandleWaiters()
	r.Flush()
	return problems
}

// inherit keeps state of the same domain in the previous config where it is still right.
func (d *domain) inherit(o *domain) {
	d.stats = o.stats
	sameAddr := d.m.Interface == o.m.Interface
	if sameAddr {
		d.arp = o.arp
	}
	if d.dhcpClient != nil && o.dhcpClient != nil {
		d.dhcpClient, d.ip = o.dhcpClient, o.ip
		d.arp = o.arp
	}
	if d.dhcpServer != nil && o.dhcpServer != nil && sameAddr &&
		d.dhcpServer.first == o.dhcpServer.first && d.dhcpServer.last == o.dhcpServer.last {
		d.dhcpServer.allocs, d.dhcpServer.used = o.dhcpServer.allocs, o.dhcpServer.used
	}
}

// carryOver moves a link state into the new domains when the new config still creates it
// exactly so, and otherwise lets it go.
func (r *Router) carryOver(l *link) {
	oc, os := l.sides[0].dom, l.sides[1].dom
	c, s := r.domains[oc.name], r.domains[os.name]
	ok := c != nil && s != nil && c.ip.valid && s.ip.valid && c.ip.addr == oc.ip.addr && s.ip.addr == os.ip.addr
	if ok {
		ck, sk := l.sides[0].key, l.sides[1].key
		dec, found := c.decide(l.p, ck.dst, ck.dport)
		srvPort := sk.sport
		if l.p == pICMP && l.natPort != 0 {
			srvPort = dec.dport // the server side's echo ID is the NAT's
		}
		ok = found && dec.to == s && dec.dst == sk.src && dec.dport == srvPort
		if ok {
			quota, nat := s.natQuota(c, l.p)
			if l.natPort != 0 {
				used := s.quota[c.name]
				if used == nil {
					used = &[3]int{}
					s.quota[c.name] = used
				}
				ok = nat && used[l.p] < quota && s.ports[l.p].Take(l.natPort)
				if ok {
					used[l.p]++
				}
			} else {
				ok = !nat
			}
		}
	}
	if !ok {
		l.natPort = 0 // the old domains' port spaces are gone with them
		l.owner.links--
		l.owner.counts.links[l.p].destroyed++
		if r.cfg.Verbose {
			r.log.Info("dissolve link state", "protocol", protoNames[l.p], "client_domain", oc.name,
				"client", addrPort(l.sides[0].key.src, l.sides[0].key.sport), "reason", "no longer allowed by the config")
		}
		return
	}
	l.sides[0].dom, l.sides[1].dom = c, s
	c.links[l.sides[0].key] = &l.sides[0]
	s.links[l.sides[1].key] = &l.sides[1]
	r.links[l] = struct{}{}
}
