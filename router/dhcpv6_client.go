package router

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
)

// dhcp6Client is stateless DHCPv6 (RFC 8415 18.2.6) of a SLAAC domain, started by an RA
// with the O (or M) flag: an Information-Request from the link-local address to
// ff02::1:2, retransmitted as RFC 8415 15 says (INF_TIMEOUT doubling up to INF_MAX_RT, no
// count or duration limit) until a Reply with the transaction ID comes, whose DNS servers
// (option 23) and domain list (24) the domain then has; the exchange is made again after
// the Reply's information refresh time (32; 86400 s without, at least 600 s) and when the
// link comes back (18.2.12).
type dhcp6Client struct {
	active  bool
	xid     uint32
	first   int64 // when this exchange's first Information-Request went (0: not yet)
	next    int64 // when the next goes (0: none due)
	rt      time.Duration
	maxRT   time.Duration // INF_MAX_RT, or the server's option 83
	dns     []netip.Addr
	domains []string
}

// RFC 8415 7.6's INF_MAX_DELAY, INF_TIMEOUT, INF_MAX_RT, IRT_DEFAULT, IRT_MINIMUM.
const (
	infMaxDelay = time.Second
	infTimeout  = time.Second
	infMaxRT    = time.Hour
	irtDefault  = 86400 * time.Second
	irtMinimum  = 600 * time.Second
)

// want starts the exchange unless it runs: an RA asked for it.
func (c *dhcp6Client) want(r *Router, d *domain) {
	if !c.active {
		c.active = true
		c.begin(r, d)
	}
}

// restart makes the exchange again when it was wanted (the link came back).
func (c *dhcp6Client) restart(r *Router, d *domain) {
	if c.active {
		c.begin(r, d)
	}
}

// begin starts an exchange: the first Information-Request within INF_MAX_DELAY (random).
func (c *dhcp6Client) begin(r *Router, d *domain) {
	c.first, c.rt = 0, 0
	if c.maxRT == 0 {
		c.maxRT = infMaxRT
	}
	c.next = r.nowNs + c.jitter(r, d).Int64N(int64(infMaxDelay)+1)
}

// jitter is the random source of RFC 8415's RAND, from the domain's MAC and the time as the
// RA's (ra.go): one router does the same on the same input.
func (c *dhcp6Client) jitter(r *Router, d *domain) *rand.Rand {
	var m header.MAC
	if len(d.ifs) > 0 {
		m = d.ifs[0].routerMAC
	}
	return rand.New(rand.NewPCG(uint64(m[2])<<24|uint64(m[3])<<16|uint64(m[4])<<8|uint64(m[5]), uint64(r.nowNs)^uint64(c.xid)))
}

// tick sends the Information-Request that is due and sets the retransmission timeout: RT
// from INF_TIMEOUT, then twice the last, each with RAND of +-0.1, at most maxRT (RFC 8415
// 15).
func (c *dhcp6Client) tick(r *Router, d *domain) {
	if c.next == 0 || r.nowNs < c.next || len(d.ifs) == 0 {
		return
	}
	if c.first == 0 { // a new exchange, a new transaction ID
		r.xid++
		c.xid, c.first = r.xid&0xffffff, r.nowNs
	}
	rng := c.jitter(r, d)
	rand01 := func(rt time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(rt)/5+1)) - rt/10 }
	switch {
	case c.rt == 0:
		c.rt = infTimeout + rand01(infTimeout)
	default:
		c.rt = 2*c.rt + rand01(c.rt)
	}
	if c.rt > c.maxRT {
		c.rt = c.maxRT + rand01(c.maxRT)
	}
	c.next = r.now.Add(c.rt).UnixNano()
	c.send(r, d)
}

// send sends the Information-Request out of each of d's interfaces: the client's DUID-LL,
// the options it wants, the time since the exchange began in hundredths of a second.
func (c *dhcp6Client) send(r *Router, d *domain) {
	elapsed := min((r.nowNs-c.first)/int64(10*time.Millisecond), 0xffff)
	for _, i := range d.ifs {
		if i.llDup {
			continue
		}
		msg := make([]byte, 64)
		w := header.StartDHCPv6(msg, header.DHCPv6InfoRequest, c.xid)
		w.Add(header.DHCPv6OptClientID, header.DUIDLL(i.routerMAC))
		w.Add(header.DHCPv6OptORO, []byte{0, header.DHCPv6OptDNSServers, 0, header.DHCPv6OptDomainList,
			0, header.DHCPv6OptRefreshTime, 0, header.DHCPv6OptInfMaxRT})
		w.Add(header.DHCPv6OptElapsedTime, binary.BigEndian.AppendUint16(nil, uint16(elapsed)))
		r.emit(i, udp6Frame(i.routerMAC, header.MulticastMAC(header.AllDHCPAgents), i.ll, header.AllDHCPAgents,
			header.DHCPv6ClientPort, header.DHCPv6ServerPort, w.Bytes()))
	}
}

// udp6Frame is a frame of a UDP datagram with payload, hop limit 1 (the router's are for the
// link).
func udp6Frame(srcMAC, dstMAC header.MAC, src, dst [16]byte, sport, dport uint16, payload []byte) []byte {
	b := make([]byte, header.EthLen+header.IPv6Len+header.UDPLen+len(payload))
	e := header.Eth(b)
	e.SetSrc(srcMAC)
	e.SetDst(dstMAC)
	e.SetType(header.EtherTypeIPv6)
	seg := b[header.EthLen+header.IPv6Len:]
	header.PutIPv6(b[header.EthLen:], len(seg), header.ProtoUDP, 1, src, dst)
	header.Ports(seg).SetSrc(sport)
	header.Ports(seg).SetDst(dport)
	binary.BigEndian.PutUint16(seg[4:], uint16(len(seg)))
	copy(seg[header.UDPLen:], payload)
	sum := header.Checksum(seg, header.PseudoSum6(src, dst, header.ProtoUDP, len(seg)))
	if sum == 0 {
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(seg[6:], sum)
	return b
}

// receive takes a datagram to the DHCPv6 client port of the router at i: a Reply to the
// Information-Request in flight (its transaction ID, the client's DUID if it names one).
func (c *dhcp6Client) receive(r *Router, d *domain, i *Interface, ip header.IPv6, seg []byte) {
	if len(seg) < header.UDPLen || header.Checksum(seg, header.PseudoSum6(ip.Src(), ip.Dst(), header.ProtoUDP, len(seg))) != 0 ||
		binary.BigEndian.Uint16(seg[6:]) == 0 {
		r.drop(d, "bad UDP checksum")
		return
	}
	m, ok := header.NewDHCPv6(seg[header.UDPLen:])
	if !ok || m.Type() != header.DHCPv6Reply || !c.active || c.first == 0 || m.XID() != c.xid {
		r.drop(d, "DHCPv6 reply not for this client")
		return
	}
	if id, ok := m.Option(header.DHCPv6OptClientID); ok && string(id) != string(header.DUIDLL(i.routerMAC)) {
		r.drop(d, "DHCPv6 reply not for this client")
		return
	}
	if _, ok := m.Option(header.DHCPv6OptServerID); !ok {
		r.drop(d, "DHCPv6 reply without server identifier") // RFC 8415 16.10
		return
	}
	var dns []netip.Addr
	if v, ok := m.Option(header.DHCPv6OptDNSServers); ok && len(v)%16 == 0 {
		for k := 0; k < len(v); k += 16 {
			if a := netip.AddrFrom16([16]byte(v[k:])); !a.IsMulticast() && !a.IsUnspecified() && !slices.Contains(dns, a) {
				dns = append(dns, a)
			}
		}
	}
	c.domains = nil
	if v, ok := m.Option(header.DHCPv6OptDomainList); ok {
		c.domains, _ = header.DomainNames(v)
	}
	refresh := irtDefault
	if v, ok := m.Option(header.DHCPv6OptRefreshTime); ok && len(v) == 4 {
		refresh = max(time.Duration(binary.BigEndian.Uint32(v))*time.Second, irtMinimum)
	}
	if v, ok := m.Option(header.DHCPv6OptInfMaxRT); ok && len(v) == 4 {
		if s := time.Duration(binary.BigEndian.Uint32(v)) * time.Second; s >= 60*time.Second && s <= 86400*time.Second {
			c.maxRT = s // RFC 8415 21.25: 60 to 86400 s
		}
	}
	c.first, c.rt, c.next = 0, 0, r.now.Add(refresh).UnixNano()
	if r.cfg.VerboseDomainState {
		r.log.Info("DHCPv6 information", "domain", d.name, "dns", dns, "domains", c.domains, "refresh", refresh)
	}
	if !slices.Equal(dns, c.dns) {
		old := d.slaac.dns()
		c.dns = dns
		if !slices.Equal(old, d.slaac.dns()) {
			r.followDNS6(d)
		}
	}
}
