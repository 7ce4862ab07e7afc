package router

import (
	"net/netip"
	"strings"
)

// setIPConfig changes a DHCP-client domain's IPv4 config as Genode's domain reconstructs it.
// When the address, subnet or gateway change or go away, the link states through the domain
// end, its ARP cache is cleared and frames held for ARP there are dropped; a config that keeps
// them (a renewal that brings other DNS servers) keeps all that. The domains whose DHCP
// server takes its DNS config from d follow (followDNSConfig).
func (r *Router) setIPConfig(d *domain, c ipConfig) {
	old := d.ip
	d.ip = c
	r.gen++
	if rc := r.cfg.Report; rc != nil && rc.ConfigTriggers {
		r.reportTrigger = true
	}
	if r.cfg.VerboseDomainState {
		r.log.Info("dynamic IP config", "domain", d.name, "config", c.String())
	}
	if old.valid && !c.sameAddressing(&old) {
		r.clearARP(d)
		for l := range r.links {
			if !l.v6 && (l.sides[0].dom == d || l.sides[1].dom == d) {
				r.dissolve(l, "IPv4 config of "+d.name+" changed")
			}
		}
		r.cancelDomainWaiters(d)
	}
	r.followDNSConfig(d, old.valid)
}

// followDNSConfig re-evaluates the domains whose DHCP server takes its DNS config from d
// (dns_config_from) after d's IPv4 config changed, as Genode's domain tells its "IP config
// dependents": their Nic sessions' links are down while d has no config (a client asks for
// DHCP only once there is a DNS config to hand out), and go down and up again when a config
// d had is replaced, so that their clients ask again and get the new one. Their DHCP leases
// stay: a client's new request renews its own.
func (r *Router) followDNSConfig(d *domain, replaced bool) {
	for _, name := range sortedDomainNames(r.domains) {
		e := r.domains[name]
		if e.dhcpServer == nil || e.dhcpServer.from != d {
			continue
		}
		if r.cfg.VerboseDomainState {
			state := "down"
			switch {
			case d.ip.valid && replaced:
				state = "down-up"
			case d.ip.valid:
				state = "up"
			}
			r.log.Info("link state", "domain", e.name, "state", state, "reason", "DNS config from "+d.name)
		}
		for _, i := range e.ifs {
			r.refetchLink(i, replaced)
		}
	}
}

// cancelDomainWaiters drops the frames held for an ARP reply in d, whose IPv4 config changed.
func (r *Router) cancelDomainWaiters(d *domain) {
	for _, w := range d.waiters { // unhold deletes w from the map: allowed while ranging
		for _, f := range r.unhold(w) {
			r.drop(f.in, "ARP got cancelled: IPv4 config of "+d.name+" changed")
			f.from.port.Release(f.id)
		}
	}
}

// sameAddressing reports whether a and b give the router the same address, subnet and
// gateway: what link states, ARP caches and held frames depend on.
func (c *ipConfig) sameAddressing(o *ipConfig) bool {
	return c.valid == o.valid && c.addr == o.addr && c.mask == o.mask && c.gateway == o.gateway && c.hasGW == o.hasGW
}

func sameIPConfig(a, b ipConfig) bool {
	return a.sameAddressing(&b) && sameDNS(a, b)
}

// sameDNS reports whether a and b name the same DNS servers, in the same order, and domain.
func sameDNS(a, b ipConfig) bool {
	if a.dnsDomain != b.dnsDomain || len(a.dns) != len(b.dns) {
		return false
	}
	for k := range a.dns {
		if a.dns[k] != b.dns[k] {
			return false
		}
	}
	return true
}

// String is the config as Genode's verbose_domain_state prints it.
func (c ipConfig) String() string {
	if !c.valid {
		return "none"
	}
	var b strings.Builder
	b.WriteString("interface " + c.prefix().String())
	if c.hasGW {
		b.WriteString(", gateway " + netip.AddrFrom4(c.gateway).String())
	}
	for _, a := range c.dns {
		b.WriteString(", DNS server " + a.String())
	}
	if c.dnsDomain != "" {
		b.WriteString(", DNS domain " + c.dnsDomain)
	}
	return b.String()
}
