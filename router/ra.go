package router

import (
	"math/rand/v2"
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
	d.ra.multicast = r.nowNs
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
	d.ra.multicast = r.nowNs
}

// sendRA sends the domain's RA out of i, from the router's link-local address there.
func (r *Router) sendRA(i *Interface, d *domain, mac header.MAC, dst [16]byte) {
	if i.llDup {
		return // an RA comes from a link-local address (RFC 4861 6.1.2)
	}
	ra := d.m.RA
	n := header.IPv6Len + 16 + 8 + 8 + 32
	if len(ra.DNSServers) > 0 {
		n += 8 + 16*len(ra.DNSServers)
	}
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
	if len(ra.DNSServers) > 0 {
		dns := make([][16]byte, len(ra.DNSServers))
		for k, a := range ra.DNSServers {
			dns[k] = a.As16()
		}
		// RFC 8106 5.1: at least 3 times the longest interval between RAs.
		w.RDNSS(uint32(3*ra.MaxInterval/time.Second), dns...)
	}
	r.sendNDP(i, mac, b, w.Finish())
}
