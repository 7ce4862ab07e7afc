package router

import (
	"net/netip"

	"github.com/nicstack/nicstack/router/model"
)

// Configure applies a new <config>, as model.Parse read it. Its problems (unknown attributes,
// invalid domains and why) are logged; the router runs with what is valid. Interfaces are put into domains
// again by the new policies; link states survive when the new rules still route their first
// packet the same way (same destination domain, address, port and NAT); ARP caches and
// DHCP-client configs of domains that kept their name and addressing are kept, and DHCP
// leases as inheritLeases says. A Nic session whose DHCP config became outdated (it moved to
// another domain, or its lease went) sees its link go down and up, so that its client asks
// again.
func (r *Router) Configure(cfg *model.Config) {
	r.setNow()
	r.gen++
	for _, p := range cfg.Problems { // invalid domains among them, each with its reason
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
	outdated := map[*Interface]bool{}
	for _, name := range sortedDomainNames(r.domains) { // after every IPv4 config is inherited
		d := r.domains[name]
		if o := old[name]; o != nil {
			r.inheritLeases(d, o, outdated)
		} else if d.dhcpClient == nil && r.cfg.VerboseDomainState {
			r.log.Info("static IP config", "domain", d.name, "config", d.ip.String())
		}
	}
	// Links first (they need the old interface-to-domain mapping only through their sides).
	oldLinks := r.links
	r.links = map[*link]struct{}{}
	for l := range oldLinks {
		r.carryOver(l)
	}
	before := make(map[*Interface]string, len(r.ifs))
	for _, i := range r.ifs {
		if i.dom != nil {
			before[i] = i.dom.name
		}
		i.dom = nil
	}
	for _, i := range r.ifs {
		r.assign(i)
		was := before[i]
		if was == "" || i.dom == nil {
			continue
		}
		if was != i.dom.name {
			if d := r.domains[was]; d != nil && d.dhcpServer != nil {
				d.dhcpServer.forget(r, i)
			}
			outdated[i] = true
		}
		if outdated[i] {
			if r.cfg.VerboseDomainState && i.kind == Nic {
				r.log.Info("link state", "domain", i.dom.name, "label", i.label, "state", "down-up", "reason", "DHCP config outdated")
			}
			r.refetchLink(i, true)
		}
	}
	// A DHCP-client domain that kept no interface loses its config, as when the last one
	// detaches (leave).
	for _, name := range sortedDomainNames(r.domains) {
		if d := r.domains[name]; d.dhcpClient != nil && len(d.ifs) == 0 && d.ip.valid {
			d.dhcpClient.state = clientIdle
			r.setIPConfig(d, ipConfig{})
			r.keepClient(d)
		}
	}
	if c := r.restored; c != nil {
		r.restored = nil
		r.restore(c)
	} else {
		r.sweep()
	}
	// Held frames are routed again under the new rules.
	r.rehandleWaiters()
	r.Flush()
}

// inherit keeps state of the same domain in the previous config where it is still right.
func (d *domain) inherit(o *domain) {
	d.stats = o.stats
	sameAddr := d.m.Interface == o.m.Interface
	if sameAddr {
		d.arp = o.arp
	}
	if d.m.Interface6 == o.m.Interface6 {
		d.nd = o.nd
	}
	if d.slaac != nil && o.slaac != nil {
		d.slaac, d.ip6, d.nd = o.slaac, o.ip6, o.nd
	}
	if d.ra.from != nil && o.ra.from != nil { // what the RAs announced, to withdraw it
		d.ra.announced, d.ra.withdrawn = o.ra.announced, o.ra.withdrawn
	}
	if d.dhcpClient != nil && o.dhcpClient != nil {
		d.dhcpClient, d.ip = o.dhcpClient, o.ip
		d.arp = o.arp
	}
}

// inheritLeases keeps the DHCP allocations of o's server that d's can keep, as Genode's router
// does for the interfaces that stay with their domain: if the server hands out the same as
// before (model.DHCPServer.SameOffer, the same DNS config from its dns_config_from domain, at
// the same address), those whose address is still in the range; otherwise none. The
// interfaces that lost an allocation are marked outdated, and every interface of the domain
// when what the server hands out changed (or the server came or went).
func (r *Router) inheritLeases(d, o *domain, outdated map[*Interface]bool) {
	s, os := d.dhcpServer, o.dhcpServer
	if s == nil && os == nil {
		return
	}
	dismiss := func(a *allocation, why string) {
		if r.cfg.Verbose {
			r.log.Info("dismiss DHCP allocation", "domain", d.name, "mac", a.mac, "ip", netip.AddrFrom4(a.ip), "reason", why)
		}
		outdated[a.ifc] = true
	}
	if s == nil || os == nil || d.m.Interface != o.m.Interface || !s.m.SameOffer(os.m) || !sameDNSOffer(s, os) {
		for _, i := range o.ifs {
			outdated[i] = true
		}
		if os != nil {
			for _, a := range os.allocs {
				dismiss(a, "other/no DHCP server")
			}
		}
		return
	}
	for _, a := range os.allocs {
		n := be(a.ip)
		if n < s.first || n > s.last {
			dismiss(a, "no IP")
			continue
		}
		s.allocs[a.mac], s.used[n] = a, a
	}
}

// sameDNSOffer reports whether two DHCP servers hand out the same DNS config now.
func sameDNSOffer(s, o *dhcpServer) bool {
	dns, dom, ok := s.dns()
	odns, odom, ook := o.dns()
	return ok == ook && sameDNS(ipConfig{dns: dns, dnsDomain: dom}, ipConfig{dns: odns, dnsDomain: odom})
}

// carryOver moves a link state into the new domains when the new config still creates it
// exactly so, and otherwise lets it go.
func (r *Router) carryOver(l *link) {
	oc, os := l.sides[0].dom, l.sides[1].dom
	c, s := r.domains[oc.name], r.domains[os.name]
	var ok bool
	if l.v6 {
		ok = c != nil && s != nil && c.ip6.addr == oc.ip6.addr && s.ip6.addr == os.ip6.addr && r.admit6(l, c, s)
	} else {
		ok = c != nil && s != nil && c.ip.valid && s.ip.valid && c.ip.addr == oc.ip.addr && s.ip.addr == os.ip.addr && r.admit(l, c, s)
	}
	if !ok {
		l.natPort = 0 // the old domains' port spaces are gone with them
		r.unkeep(&l.slot)
		l.owner.links--
		l.owner.counts.links[l.p].destroyed++
		if r.cfg.Verbose {
			r.log.Info("dissolve link state", "protocol", protoNames[l.p], "client_domain", oc.name,
				"client", l.client(), "reason", "no longer allowed by the config")
		}
		return
	}
}

// admit enters link state l between client domain c and server domain s when the config
// creates it so: the rules route its first packet to s, to the address and port of its
// server side, and NAT there as before (its port taken again), and neither tuple is taken.
func (r *Router) admit(l *link, c, s *domain) bool {
	ck, sk := l.sides[0].key, l.sides[1].key
	dec, found := c.decide(l.p, ck.dst, ck.dport)
	srvPort := sk.sport
	if l.p == pICMP && l.natPort != 0 {
		srvPort = dec.dport // the server side's echo ID is the NAT's
	}
	if !found || dec.to != s || dec.dst != sk.src || dec.dport != srvPort || c.links[ck] != nil || s.links[sk] != nil {
		return false
	}
	if !r.takeNAT(l, c, s, &s.ports[l.p]) {
		return false
	}
	l.sides[0].dom, l.sides[1].dom = c, s
	c.links[ck] = &l.sides[0]
	s.links[sk] = &l.sides[1]
	r.links[l] = struct{}{}
	return true
}
