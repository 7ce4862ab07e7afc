package router

import (
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/region"
)

// SLAAC (RFC 4862) is how a domain with interface_ipv6="slaac" gets its IPv6 config, as a
// domain without interface gets its IPv4 one from its DHCP client (dhcp_client.go): the
// router solicits on the domain's interfaces, takes the first RA that brings an autonomous
// /64, forms its address from it and the MAC of the domain's first interface (modified
// EUI-64), runs DAD for it, and follows the RA's sender as gateway_ipv6 with its MTU. The
// prefix's lifetimes and the router lifetime are kept: when the valid lifetime ends the
// address goes, when the router lifetime ends the gateway; a later RA of the same router
// refreshes them. Until the address is there, the domain's IPv6 is not forwarded, as IPv4
// waits for its lease. DNS servers come from the RA's RDNSS (RFC 8106) and, when the RA has
// the O flag, from DHCPv6 (dhcpv6_client.go).
type slaacClient struct {
	// nextRS is when the next router solicitation goes (0: none, a router is followed);
	// rsGap the wait after it, doubled from 4 s up to an hour (RFC 7559).
	nextRS int64
	rsGap  time.Duration
	// The ends (Unix nanoseconds, math.MaxInt64: infinite) of the address's valid and
	// preferred lifetimes and of the router lifetime of the gateway.
	validEnd, preferredEnd, routerEnd int64
	mtu                               int // the RA's MTU option; 0: the domain's mtu
	// rdnss are the DNS servers of the followed router's RA, till rdnssEnd.
	rdnss    []netip.Addr
	rdnssEnd int64
	dhcp     dhcp6Client
	slot     int32 // in the state region, while the domain has its address
}

// RFC 4861 10's RTR_SOLICITATION_INTERVAL and RFC 7559's MAX_RTR_SOLICITATION_INTERVAL;
// RFC 4862 5.5.3 e)'s two hours, below which an RA cannot shorten a valid lifetime.
const (
	rsInterval    = 4 * time.Second
	rsMaxInterval = time.Hour
	twoHours      = int64(2 * time.Hour)
)

// start solicits at once, as when a link comes up (RFC 4861 6.3.7), on every interface of d,
// unless a router is followed: an interface joins again at every reconfiguration, and
// the uplink's link coming back (its session attaching again) found the domain reset.
func (c *slaacClient) start(r *Router, d *domain) {
	if d.ip6.hasGW {
		return
	}
	c.nextRS, c.rsGap = r.nowNs, rsInterval
	c.solicit(r, d)
	if d.m.DHCPv6 == "always" {
		c.dhcp.want(r, d)
	}
	c.dhcp.restart(r, d)
}

// solicit sends the router solicitations that are due: from the link-local address, with
// the source link-layer address option once DAD is past (RFC 4429 3.2 leaves it out of an
// optimistic address's).
func (c *slaacClient) solicit(r *Router, d *domain) {
	if c.nextRS == 0 || r.nowNs < c.nextRS {
		return
	}
	for _, i := range d.ifs {
		if i.llDup {
			continue
		}
		b := make([]byte, ndpFrameLen)
		w := header.StartRS(b[header.EthLen:], i.ll, header.AllRouters)
		if r.nowNs >= i.llDAD {
			w.LinkAddr(header.NDPOptSourceLinkAddr, i.routerMAC)
		}
		r.sendNDP(i, header.MulticastMAC(header.AllRouters), b, w.Finish())
	}
	c.nextRS = r.now.Add(c.rsGap).UnixNano()
	c.rsGap = min(2*c.rsGap, rsMaxInterval)
}

// tick ends what outlived its lifetime and solicits while no router is followed.
func (c *slaacClient) tick(r *Router, d *domain) {
	if len(d.ifs) == 0 {
		return
	}
	switch {
	case d.ip6.valid && r.nowNs >= c.validEnd:
		r.log.Info("SLAAC address's valid lifetime ended", "domain", d.name, "address", netip.AddrFrom16(d.ip6.addr))
		r.setIP6Config(d, ip6Config{})
		c.startOver(r)
		r.keepSLAAC(d)
	case d.ip6.hasGW && r.nowNs >= c.routerEnd:
		r.log.Info("SLAAC router lifetime ended", "domain", d.name, "gateway", netip.AddrFrom16(d.ip6.gateway))
		cfg := d.ip6
		cfg.hasGW, cfg.gateway = false, [16]byte{}
		r.setIP6Config(d, cfg)
		c.startOver(r)
		r.keepSLAAC(d)
	}
	if c.rdnss != nil && r.nowNs >= c.rdnssEnd {
		c.rdnss = nil
		r.followDNS6(d)
		r.keepSLAAC(d)
	}
	c.solicit(r, d)
	c.dhcp.tick(r, d)
}

// startOver solicits again, soon: the router followed is gone.
func (c *slaacClient) startOver(r *Router) {
	if c.nextRS == 0 {
		c.nextRS, c.rsGap = r.nowNs, rsInterval
	}
}

// reset forgets all: d's last interface left, and the next may lead to another network.
func (r *Router) resetSLAAC(d *domain) {
	c := d.slaac
	had := len(c.dns()) > 0
	r.unkeep(&c.slot)
	*c = slaacClient{}
	if d.ip6.valid {
		r.setIP6Config(d, ip6Config{})
	}
	if had {
		r.followDNS6(d)
	}
}

// lifetimeEnd is the end of a lifetime of s seconds from now; 0xffffffff is infinity.
func (r *Router) lifetimeEnd(s uint32) int64 {
	if s == math.MaxUint32 {
		return math.MaxInt64
	}
	return r.nowNs + int64(s)*int64(time.Second)
}

// slaacRA takes an RA, checked by header.CheckNDP (hop limit 255, link-local source, code,
// checksum, options), at interface i of a SLAAC domain. While a router is followed, RAs of
// others are dropped; the followed one's refresh or end (router lifetime 0) the gateway.
func (r *Router) slaacRA(i *Interface, d *domain, ip header.IPv6, n header.NDP) Verdict {
	c := d.slaac
	src := ip.Src()
	if d.ip6.hasGW && src != d.ip6.gateway {
		return r.drop(d, "RA from a router the domain does not follow")
	}
	var pfx header.NDPPrefix
	var hasPfx bool
	var dns []netip.Addr
	dnsLife, mtu := uint32(0), 0
	for o, rest, ok := n.Options().Next(); ok; o, rest, ok = rest.Next() {
		switch o.Type() {
		case header.NDPOptSourceLinkAddr:
			if mac, ok := o.LinkAddr(); ok {
				r.learn6(d, src, mac, true)
			}
		case header.NDPOptPrefixInfo:
			p, ok := o.Prefix()
			// RFC 4862 5.5.3 a)-d): autonomous, not link-local, preferred within valid,
			// and a /64, as the interface identifier is 64 bits.
			if !ok || hasPfx || p.Flags&header.PrefixA == 0 || header.IsLinkLocal6(p.Prefix) || p.Preferred > p.Valid || p.Len != 64 {
				continue
			}
			if d.ip6.valid && header.SLAACAddr(p.Prefix, d.ifs[0].routerMAC) != d.ip6.addr {
				continue // one address per domain: the prefix it has
			}
			pfx, hasPfx = p, true
		case header.NDPOptMTU:
			if v, ok := o.MTU(); ok && v >= header.IPv6MinMTU && int(v) <= d.m.MTU {
				mtu = int(v)
			}
		case header.NDPOptRDNSS:
			life, k, ok := o.RDNSS()
			if !ok {
				continue
			}
			dnsLife = life
			for j := range k {
				if a := netip.AddrFrom16(o.RDNSSAddr(j)); !slices.Contains(dns, a) && !a.IsMulticast() && !a.IsUnspecified() {
					dns = append(dns, a)
				}
			}
		}
	}
	cfg := d.ip6
	if hasPfx && !d.ip6.valid && pfx.Valid == 0 {
		hasPfx = false // RFC 4862 5.5.3 d): no address of a prefix that is gone
	}
	if hasPfx {
		if !d.ip6.valid {
			p := netip.PrefixFrom(netip.AddrFrom16(pfx.Prefix), 64).Masked()
			cfg = ip6Config{valid: true, addr: header.SLAACAddr(p.Addr().As16(), d.ifs[0].routerMAC), prefix: p}
			if pfx.Flags&header.PrefixL == 0 {
				// Not on-link: only the router's own address is.
				cfg.prefix = netip.PrefixFrom(netip.AddrFrom16(cfg.addr), 128)
			}
			c.validEnd = r.lifetimeEnd(pfx.Valid)
		} else if end := r.lifetimeEnd(pfx.Valid); pfx.Valid > uint32(twoHours/int64(time.Second)) || end > c.validEnd {
			c.validEnd = end
		} else if c.validEnd-r.nowNs > twoHours {
			// RFC 4862 5.5.3 e): an RA cannot end an address sooner than in two hours.
			c.validEnd = r.nowNs + twoHours
		}
		c.preferredEnd = r.lifetimeEnd(pfx.Preferred)
	}
	if life := n.RouterLifetime(); life > 0 {
		cfg.gateway, cfg.hasGW = src, true
		c.routerEnd = r.lifetimeEnd(uint32(life))
		c.nextRS = 0
	} else if cfg.hasGW {
		cfg.gateway, cfg.hasGW = [16]byte{}, false
		c.startOver(r)
	}
	if mtu != 0 {
		c.mtu = mtu
	}
	if dns != nil || c.rdnss != nil {
		old := c.dns()
		c.rdnss, c.rdnssEnd = dns, r.lifetimeEnd(dnsLife)
		if dnsLife == 0 {
			c.rdnss = nil
		}
		if !slices.Equal(old, c.dns()) {
			r.followDNS6(d)
		}
	}
	if cfg != d.ip6 {
		fresh := cfg.valid && !d.ip6.valid
		r.setIP6Config(d, cfg)
		if fresh {
			r.log.Info("SLAAC address", "domain", d.name, "address", netip.AddrFrom16(cfg.addr), "gateway", netip.AddrFrom16(cfg.gateway))
			d.ip6.dad = r.now.Add(dadWindow).UnixNano()
			for _, o := range d.ifs {
				r.solicitDAD(o, cfg.addr)
			}
		}
	}
	if n.RAFlags()&(header.RAOther|header.RAManaged) != 0 && d.m.DHCPv6 == "ra" {
		c.dhcp.want(r, d)
	}
	r.keepSLAAC(d)
	return Done
}

// keepSLAAC keeps d's SLAAC config in the state region while it has an address, so that a
// restarted router has it (and the IPv6 links through it) at once; without one it frees it.
func (r *Router) keepSLAAC(d *domain) {
	c := d.slaac
	if r.keep == nil {
		return
	}
	if !d.ip6.valid {
		r.unkeep(&c.slot)
		return
	}
	rec := region.SLAAC{Domain: d.key, Addr: d.ip6.addr, PrefixBits: uint8(d.ip6.prefix.Bits()), Gateway: d.ip6.gateway,
		HasGateway: d.ip6.hasGW, ValidEnd: c.validEnd, PreferredEnd: c.preferredEnd, RouterEnd: c.routerEnd,
		MTU: uint16(c.mtu), RDNSSEnd: c.rdnssEnd}
	for _, a := range c.rdnss[:min(len(c.rdnss), region.MaxRDNSS)] {
		rec.RDNSS = append(rec.RDNSS, a.As16())
	}
	c.slot = r.kept(r.keep.Put(c.slot, &rec))
}

// restoreSLAAC gives SLAAC domain d the config a router before this one kept, if it is one
// SLAAC could have made (a global unicast address of a /64, or its /128 when not on-link,
// a link-local gateway, an MTU the domain's link takes) and its address is still valid. An
// RS goes only if no router is followed, as after a reconfiguration; DHCPv6 asks again.
func (r *Router) restoreSLAAC(d *domain, rec *region.SLAAC) bool {
	if d == nil || d.slaac == nil || d.ip6.valid {
		return false
	}
	a := netip.AddrFrom16(rec.Addr)
	gw := netip.AddrFrom16(rec.Gateway)
	switch {
	case !a.IsGlobalUnicast() && !a.IsPrivate(), rec.PrefixBits != 64 && rec.PrefixBits != 128, rec.ValidEnd <= r.nowNs,
		rec.HasGateway && !gw.IsLinkLocalUnicast(), rec.MTU != 0 && (rec.MTU < header.IPv6MinMTU || int(rec.MTU) > d.m.MTU):
		return false
	}
	c := d.slaac
	d.ip6 = ip6Config{valid: true, addr: rec.Addr, prefix: netip.PrefixFrom(a, int(rec.PrefixBits)).Masked()}
	if rec.HasGateway && rec.RouterEnd > r.nowNs {
		d.ip6.gateway, d.ip6.hasGW = rec.Gateway, true
	}
	c.validEnd, c.preferredEnd, c.routerEnd, c.mtu = rec.ValidEnd, rec.PreferredEnd, rec.RouterEnd, int(rec.MTU)
	for _, s := range rec.RDNSS {
		if a := netip.AddrFrom16(s); !a.IsMulticast() && !a.IsUnspecified() && !slices.Contains(c.rdnss, a) {
			c.rdnss = append(c.rdnss, a)
		}
	}
	c.rdnssEnd, c.slot = rec.RDNSSEnd, rec.Slot
	if !d.ip6.hasGW {
		c.startOver(r)
	}
	return true
}

// dns are the IPv6 DNS servers d learned: the RA's RDNSS, then DHCPv6's.
func (c *slaacClient) dns() []netip.Addr {
	out := slices.Clone(c.rdnss)
	for _, a := range c.dhcp.dns {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// mtu6 is the link MTU of domain d for IPv6: the RA's, when SLAAC took one, else mtu.
func (d *domain) mtu6() int {
	if d.slaac != nil && d.slaac.mtu != 0 {
		return d.slaac.mtu
	}
	return d.m.MTU
}

// setIP6Config changes a SLAAC domain's IPv6 config as setIPConfig changes an IPv4 one: when
// the address or prefix change or go, the IPv6 link states through the domain (NAT66 to the
// old address among them) end, its neighbour cache is cleared and frames held for NDP there
// are dropped.
func (r *Router) setIP6Config(d *domain, c ip6Config) {
	old := d.ip6
	d.ip6 = c
	r.gen++
	if rc := r.cfg.Report; rc != nil && rc.ConfigTriggers {
		r.reportTrigger = true
	}
	if r.cfg.VerboseDomainState {
		state := "none"
		if c.valid {
			state = netip.PrefixFrom(netip.AddrFrom16(c.addr), c.prefix.Bits()).String()
		}
		r.log.Info("dynamic IPv6 config", "domain", d.name, "config", state)
	}
	if old.valid && (old.addr != c.addr || old.prefix != c.prefix || !c.valid) {
		clear(d.nd)
		for l := range r.links {
			if l.v6 && (l.sides[0].dom == d || l.sides[1].dom == d) {
				r.dissolve(l, "IPv6 config of "+d.name+" changed")
			}
		}
		for _, w := range d.waiters6 {
			for _, f := range r.unhold(w) {
				r.drop(f.in, "NDP got cancelled: IPv6 config of "+d.name+" changed")
				f.from.port.Release(f.id)
			}
		}
	}
}
