package router

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
)

// Router advertisements (RFC 4861 6.2) of a domain with <ra>: unsolicited ones to all nodes
// from Tick, at random intervals between a third of max_interval_sec and all of it (the first
// three at most 16 s apart), and an answer to each router solicitation. An RA carries the
// router lifetime, the domain's prefix (on-link, and autonomous for SLAAC when it is a /64),
// its mtu, and the <dns-server>s of <ra> as RDNSS (RFC 8106).

// raState is when a domain advertises next.
type raState struct {
	next      int64 // Unix nanoseconds of the next unsolicited RA
	initial   int   // unsolicited RAs sent, counted up to raInitialCount
	multicast int64 // Unix nanoseconds of the last RA to all nodes
	// from is the domain of dns_config_from (nil: none); announced are the DNS servers
	// of from the last RA carried, withdrawn those it no longer has, which the next RA to
	// all nodes announces with lifetime 0 (RFC 8106 5.1).
	from                 *domain
	announced, withdrawn []netip.Addr
}

// RFC 4861 10: MAX_INITIAL_RTR_ADVERTISEMENTS, MAX_INITIAL_RTR_ADVERT_INTERVAL,
// MIN_DELAY_BETWEEN_RAS; and the prefix lifetimes of 6.2.1's defaults.
const (
	raInitialCount    = 3
	raInitialInterval = 16 * time.Second
	raMinDelay        = 3 * time.Second
	prefixValid       = 30 * 24 * 3600
	prefixPreferred   = 7 * 24 * 3600
)

// advertiseRAs sends the unsolicited RAs that are due (Tick).
func (r *Router) advertiseRAs(d *domain) {
	ra := d.m.RA
	if ra == nil || !d.ip6.valid || len(d.ifs) == 0 || r.nowNs < d.ra.next {
		return
	}
	for _, i := range d.ifs {
		r.sendRA(i, d, header.MulticastMAC(header.AllNodes), header.AllNodes)
	}
	d.ra.multicast, d.ra.withdrawn = r.nowNs, nil
	// The jitter keeps routers on one link apart (RFC 4861 6.2.4); it comes from the
	// router's MAC there and the time, so that one router does the same on the same input.
	m := d.ifs[0].routerMAC
	rng := rand.New(rand.NewPCG(uint64(m[0])<<40|uint64(m[1])<<32|uint64(m[2])<<24|uint64(m[3])<<16|uint64(m[4])<<8|uint64(m[5]), uint64(r.nowNs)))
	interval := ra.MaxInterval/3 + time.Duration(rng.Int64N(int64(ra.MaxInterval-ra.MaxInterval/3)+1))
	if d.ra.initial < raInitialCount {
		d.ra.initial++
		interval = min(interval, raInitialInterval)
	}
	d.ra.next = r.now.Add(interval).UnixNano()
}

// solicitedRA answers a router solicitation from src (MAC mac) at interface i: unicast to a
// host that has an address (RFC 4861 6.2.6 allows it, and it needs no delay); to all nodes
// for one that has none yet, at most once per raMinDelay (else the next unsolicited RA is
// brought forward to then).
func (r *Router) solicitedRA(i *Interface, d *domain, mac header.MAC, src [16]byte) {
	if !header.IsUnspecified6(src) {
		r.sendRA(i, d, mac, src)
		return
	}
	if earliest := d.ra.multicast + int64(raMinDelay); r.nowNs < earliest {
		d.ra.next = min(d.ra.next, earliest)
		return
	}
	r.sendRA(i, d, header.MulticastMAC(header.AllNodes), header.AllNodes)
	d.ra.multicast, d.ra.withdrawn = r.nowNs, nil
}

// sendRA sends the domain's RA out of i, from the router's link-local address there.
func (r *Router) sendRA(i *Interface, d *domain, mac header.MAC, dst [16]byte) {
	if i.llDup {
		return // an RA comes from a link-local address (RFC 4861 6.1.2)
	}
	ra := d.m.RA
	servers := ra.DNSServers
	if d.ra.from != nil {
		servers = d.ra.from.dns6()
		d.ra.announced = servers
	}
	n := header.IPv6Len + 16 + 8 + 8 + 32 + 2*8 + 16*(len(servers)+len(d.ra.withdrawn))
	b := make([]byte, header.EthLen+n)
	w := header.StartRA(b[header.EthLen:], i.ll, dst, header.RAFields{CurHopLimit: 64, Lifetime: uint16(ra.Lifetime / time.Second)})
	w.LinkAddr(header.NDPOptSourceLinkAddr, i.routerMAC)
	w.MTU(uint32(d.m.MTU))
	p := header.NDPPrefix{Len: uint8(d.ip6.prefix.Bits()), Flags: header.PrefixL, Valid: prefixValid,
		Preferred: prefixPreferred, Prefix: d.ip6.prefix.Addr().As16()}
	if p.Len == 64 {
		p.Flags |= header.PrefixA
	}
	w.Prefix(p)
	if len(servers) > 0 {
		// RFC 8106 5.1: at least 3 times the longest interval between RAs.
		w.RDNSS(uint32(3*ra.MaxInterval/time.Second), as16s(servers)...)
	}
	if len(d.ra.withdrawn) > 0 {
		w.RDNSS(0, as16s(d.ra.withdrawn)...)
	}
	r.sendNDP(i, mac, b, w.Finish())
}

func as16s(as []netip.Addr) [][16]byte {
	out := make([][16]byte, len(as))
	for k, a := range as {
		out[k] = a.As16()
	}
	return out
}

// dns6 are the IPv6 DNS servers domain d learned (by SLAAC's RDNSS or DHCPv6).
func (d *domain) dns6() []netip.Addr {
	if d.slaac == nil {
		return nil
	}
	return d.slaac.dns()
}

// followDNS6 tells the domains whose <ra> takes its DNS servers from d (dns_config_from)
// that d's changed: they advertise at once, as soon as RFC 4861 6.2.4 lets them (their
// last RA to all nodes raMinDelay ago), and the next few RAs come fast again, as when a
// router's advertised information changes; servers d lost are withdrawn with lifetime 0.
// While d has none, the RAs carry no RDNSS: unlike Genode's DHCP server, which keeps its
// domain's links down then, the lan's IPv6 and IPv4 go on.
func (r *Router) followDNS6(d *domain) {
	now := d.dns6()
	for _, name := range sortedDomainNames(r.domains) {
		e := r.domains[name]
		if e.ra.from != d {
			continue
		}
		for _, a := range e.ra.announced {
			if !slices.Contains(now, a) && !slices.Contains(e.ra.withdrawn, a) {
				e.ra.withdrawn = append(e.ra.withdrawn, a)
			}
		}
		e.ra.withdrawn = slices.DeleteFunc(e.ra.withdrawn, func(a netip.Addr) bool { return slices.Contains(now, a) })
		if r.cfg.VerboseDomainState {
			r.log.Info("RA DNS config", "domain", e.name, "servers", len(now), "reason", "DNS config from "+d.name)
		}
		e.ra.next, e.ra.initial = max(r.nowNs, e.ra.multicast+int64(raMinDelay)), 0
		r.advertiseRAs(e)
	}
}
