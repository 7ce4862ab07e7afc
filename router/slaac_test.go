package router

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/region"
)

// slaacConfig is issue 35's uplink: the up domain takes its IPv6 config from an upstream
// router's RA and NATs the lan's flows to it; the lan's RA carries on the DNS servers up
// learned.
const slaacConfig = `<config verbose_packet_drop="yes">
  <policy label_prefix="vm" domain="lan"/> <policy label="up" domain="up"/>
  <report config="yes"/>
  <domain name="lan" interface="10.0.1.1/24" interface_ipv6="2001:db8:1::1/64">
    <udp dst="::/0"><permit-any domain="up"/></udp>
    <icmp dst="::/0" domain="up"/>
    <ra max_interval_sec="30" dns_config_from="up"/>
  </domain>
  <domain name="up" interface="198.18.0.10/24" interface_ipv6="slaac">
    <nat domain="lan" udp-ports="4" icmp-ids="4"/>
  </domain>
</config>`

var (
	upPrefix  = addr6("2001:db8:2::")
	upSLAAC   = header.SLAACAddr(upPrefix, macUplink)
	upLL      = header.LinkLocal(macUplink)
	upstream6 = addr6("2001:db8:2::53")
)

// raOpts are the upstream RA's fields and options (zero lifetimes: none of that option).
type raOpts struct {
	src              [16]byte
	flags            uint8
	routerLife       uint16
	prefix           [16]byte
	pfxLen, pfxFlags uint8
	valid, preferred uint32
	mtu              uint32
	dns              [][16]byte
	dnsLife          uint32
}

func upstreamRA(o raOpts) []byte {
	if o.src == ([16]byte{}) {
		o.src = gwLL6
	}
	return ndpFrame(macGateway, header.MulticastMAC(header.AllNodes), func(p []byte) header.NDPBuilder {
		w := header.StartRA(p, o.src, header.AllNodes, header.RAFields{CurHopLimit: 64, Flags: o.flags, Lifetime: o.routerLife})
		w.LinkAddr(header.NDPOptSourceLinkAddr, macGateway)
		if o.mtu != 0 {
			w.MTU(o.mtu)
		}
		if o.pfxLen != 0 {
			w.Prefix(header.NDPPrefix{Len: o.pfxLen, Flags: o.pfxFlags, Valid: o.valid, Preferred: o.preferred, Prefix: o.prefix})
		}
		if len(o.dns) > 0 {
			w.RDNSS(o.dnsLife, o.dns...)
		}
		return w
	})
}

// goodRA is an RA as an upstream router sends it: default router for 1800 s, 2001:db8:2::/64
// on-link and autonomous, MTU 1400, an RDNSS.
var goodRA = raOpts{routerLife: 1800, prefix: upPrefix, pfxLen: 64, pfxFlags: header.PrefixL | header.PrefixA,
	valid: 3600, preferred: 1800, mtu: 1400, dns: [][16]byte{upstream6}, dnsLife: 600}

// ndpOf returns the NDP messages of type typ among frames.
func ndpOf(t *testing.T, frames [][]byte, typ uint8) (out []header.NDP) {
	t.Helper()
	for _, f := range frames {
		if header.Eth(f).Type() != header.EtherTypeIPv6 {
			continue
		}
		if _, ip, m := sent6(t, f); m != nil && m.Type() == typ {
			if ip.HopLimit() != 255 {
				t.Fatalf("NDP with hop limit %d", ip.HopLimit())
			}
			out = append(out, header.NDP(m))
		}
	}
	return out
}

// rdnssOf is the RDNSS options of an RA: address to lifetime.
func rdnssOf(n header.NDP) map[netip.Addr]uint32 {
	out := map[netip.Addr]uint32{}
	for o, rest, ok := n.Options().Next(); ok; o, rest, ok = rest.Next() {
		if life, k, ok := o.RDNSS(); ok {
			for j := range k {
				out[netip.AddrFrom16(o.RDNSSAddr(j))] = life
			}
		}
	}
	return out
}

// The uplink solicits when it joins (from its link-local address, without a link-layer
// option while DAD runs), and again after 4 s with one; the first RA with an autonomous /64
// gives it its address (EUI-64 of the uplink's MAC, DAD run for it), gateway_ipv6 (the RA's
// source), the MTU and the RDNSS, reported and passed on in the lan's RA at once; the lan's
// flows leave NATed to the new address through the gateway, with checksums that hold. The
// router lifetime's end takes the gateway (and solicits again), the valid lifetime's end the
// address and the NAT66 links to it.
func TestSLAACUplink(t *testing.T) {
	b := newBench(t, slaacConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	up, upp := b.attach("up", Uplink, macUplink)
	vm6 := addr6("2001:db8:1::5")
	rs := ndpOf(t, upp.sent, header.NDPRouterSolicit)
	if len(rs) != 1 || len(rs[0].Options()) != 0 {
		t.Fatalf("RSs at join: %x", upp.sent)
	}
	if _, ip, _ := sent6(t, upp.sent[len(upp.sent)-1]); ip.Src() != upLL || ip.Dst() != header.AllRouters {
		t.Fatalf("RS from %x to %x", ip.Src(), ip.Dst())
	}
	upp.take()
	// No address yet: the lan's IPv6 to up waits, as IPv4 waits for a lease.
	b.clock.advance(2 * time.Second)
	b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, far6, header.ProtoUDP, 64, udp6(vm6, far6, 5000, 53, []byte("q"))))
	if len(upp.take()) != 0 || b.r.Stats().IPv6Dropped[Drop6NoConfig].Load() != 1 {
		t.Fatal("IPv6 forwarded to a domain without address")
	}
	b.clock.advance(2 * time.Second)
	b.r.Tick()
	if rs = ndpOf(t, upp.take(), header.NDPRouterSolicit); len(rs) != 1 {
		t.Fatalf("%d RSs after 4 s", len(rs))
	} else if o, ok := rs[0].Options().Find(header.NDPOptSourceLinkAddr); !ok {
		t.Fatal("RS after DAD without source link-layer address")
	} else if mac, _ := o.LinkAddr(); mac != macUplink {
		t.Fatalf("RS link-layer address %s", mac)
	}
	vmp.take()

	b.clock.advance(3 * time.Second) // the lan's last RA went with that Tick: RFC 4861's 3 s between
	b.send(up, upstreamRA(goodRA))
	d := b.r.domains["up"]
	if !d.ip6.valid || d.ip6.addr != upSLAAC || d.ip6.prefix.String() != "2001:db8:2::/64" || !d.ip6.hasGW || d.ip6.gateway != gwLL6 || d.mtu6() != 1400 {
		t.Fatalf("up's IPv6 config %+v, mtu %d", d.ip6, d.mtu6())
	}
	dad := ndpOf(t, upp.take(), header.NDPNeighborSolicit)
	if len(dad) != 1 || dad[0].Target() != upSLAAC {
		t.Fatalf("DAD for the SLAAC address: %d NSs", len(dad))
	}
	ras := ndpOf(t, vmp.take(), header.NDPRouterAdvert)
	if len(ras) != 1 || rdnssOf(ras[0])[netip.AddrFrom16(upstream6)] != 90 {
		t.Fatalf("the lan's RA after the uplink learned its DNS server: %d RAs", len(ras))
	}
	rep := string(b.r.Report().XML())
	if !strings.Contains(rep, `ipv6="2001:db8:2::ff:fe00:10/64"`) || !strings.Contains(rep, `ipv6_gw="fe80::1"`) || !strings.Contains(rep, `<dns ip="2001:db8:2::53"/>`) {
		t.Fatalf("report:\n%s", rep)
	}
	// Solicitations stop: a router is followed.
	b.clock.advance(time.Minute)
	b.r.Tick()
	if rs := ndpOf(t, upp.take(), header.NDPRouterSolicit); len(rs) != 0 {
		t.Fatal("RS while a router is followed")
	}
	vmp.take()

	// NAT66 to the SLAAC address, to the gateway's MAC (the RA's link-layer option).
	b.r.domains["lan"].nd[vm6] = vm.MAC()
	b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, far6, header.ProtoUDP, 64, udp6(vm6, far6, 5000, 53, []byte("q"))))
	sent := upp.take()
	if len(sent) != 1 {
		t.Fatalf("%d frames for the lan's UDP", len(sent))
	}
	e, ip, _ := sent6(t, sent[0])
	seg := ip.Payload()
	if e.Dst() != macGateway || e.Src() != macUplink || ip.Src() != upSLAAC || ip.Dst() != far6 ||
		header.Checksum(seg, header.PseudoSum6(ip.Src(), ip.Dst(), header.ProtoUDP, len(seg))) != 0 {
		t.Fatalf("NAT66 to the SLAAC address: %x", sent[0])
	}
	port := header.Ports(seg).Src()
	b.send(up, ip6Frame(macGateway, macUplink, far6, upSLAAC, header.ProtoUDP, 64, udp6(far6, upSLAAC, 53, port, []byte("a"))))
	if sent := vmp.take(); len(sent) != 1 {
		t.Fatalf("%d frames for the reply", len(sent))
	} else if _, ip, _ := sent6(t, sent[0]); ip.Dst() != vm6 {
		t.Fatalf("reply to %x", ip.Dst())
	}

	// The router lifetime ends (a refreshing RA without prefix keeps the address).
	b.send(up, upstreamRA(raOpts{routerLife: 60}))
	b.clock.advance(61 * time.Second)
	b.r.Tick()
	if d.ip6.hasGW || !d.ip6.valid {
		t.Fatalf("after the router lifetime: %+v", d.ip6)
	}
	if rs := ndpOf(t, upp.take(), header.NDPRouterSolicit); len(rs) != 1 {
		t.Fatalf("%d RSs when the router lifetime ended", len(rs))
	}
	// A later RA refreshes; then the valid lifetime ends and takes the address.
	b.send(up, upstreamRA(raOpts{routerLife: 1800, prefix: upPrefix, pfxLen: 64, pfxFlags: header.PrefixL | header.PrefixA, valid: 3600, preferred: 1800}))
	if !d.ip6.hasGW {
		t.Fatalf("after a new RA: %+v", d.ip6)
	}
	b.clock.advance(3601 * time.Second)
	b.r.Tick()
	if d.ip6.valid || len(d.nd) != 0 {
		t.Fatalf("after the valid lifetime: %+v, %d neighbours", d.ip6, len(d.nd))
	}
	if !strings.Contains(b.log.String(), "SLAAC address's valid lifetime ended") {
		t.Fatalf("log:\n%s", b.log)
	}
}

// The end of the SLAAC address dissolves the NAT66 links to it, as a lost DHCP lease
// dissolves IPv4's, and a new address (another prefix) comes with the next RA; an RA cannot
// shorten the valid lifetime below two hours (RFC 4862 5.5.3 e), nor end an infinite one.
func TestSLAACAddressLifetimes(t *testing.T) {
	b := newBench(t, strings.Replace(slaacConfig, "<config ", `<config udp_idle_timeout_sec="600" `, 1))
	vm, _ := b.attach("vm", Nic, header.MAC{})
	up, upp := b.attach("up", Uplink, macUplink)
	vm6 := addr6("2001:db8:1::5")
	brief := goodRA
	brief.valid, brief.preferred = 100, 100
	b.send(up, upstreamRA(brief))
	d := b.r.domains["up"]
	b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, far6, header.ProtoUDP, 64, udp6(vm6, far6, 5000, 53, []byte("q"))))
	if len(b.r.links) != 1 {
		t.Fatalf("%d links", len(b.r.links))
	}
	b.clock.advance(101 * time.Second)
	b.r.Tick()
	if d.ip6.valid || len(b.r.links) != 0 {
		t.Fatalf("after the valid lifetime: %+v, %d links", d.ip6, len(b.r.links))
	}
	other := goodRA
	other.prefix = addr6("2001:db8:3::")
	b.send(up, upstreamRA(other))
	upp.take()
	b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, far6, header.ProtoUDP, 64, udp6(vm6, far6, 5000, 53, []byte("q"))))
	if sent := upp.take(); len(sent) != 1 {
		t.Fatalf("%d frames after the new address", len(sent))
	} else if _, ip, _ := sent6(t, sent[0]); ip.Src() != header.SLAACAddr(other.prefix, macUplink) {
		t.Fatalf("NAT66 from %x after the address changed", ip.Src())
	}
	b.send(up, upstreamRA(other))
	short := other
	short.valid, short.preferred = 30, 30
	b.send(up, upstreamRA(short))
	if end := time.Duration(d.slaac.validEnd - b.clock.t.UnixNano()); end < time.Hour-time.Second {
		t.Fatalf("valid lifetime cut to %s by an RA of 30 s", end)
	}
	long := other
	long.valid = 3 * 3600
	b.send(up, upstreamRA(long))
	if end := time.Duration(d.slaac.validEnd - b.clock.t.UnixNano()); end != 3*time.Hour {
		t.Fatalf("valid lifetime %s after an RA of 3 h", end)
	}
	// Infinite lifetimes stay.
	inf := other
	inf.valid, inf.preferred = 0xffffffff, 0xffffffff
	b.send(up, upstreamRA(inf))
	b.clock.advance(1000 * time.Hour)
	b.r.Tick()
	if !d.ip6.valid {
		t.Fatal("an infinite valid lifetime ended")
	}
}

// Hostile or useless RAs configure nothing: hop limit other than 255 and a source that is
// not link-local (CheckNDP, counted), a prefix that is not a /64 or not autonomous, a
// link-local prefix, preferred beyond valid, an RA of another router once one is followed;
// an RA from a guest of a domain that is not SLAAC's is dropped as before.
func TestSLAACHostileRAs(t *testing.T) {
	b := newBench(t, slaacConfig)
	vm, _ := b.attach("vm", Nic, header.MAC{})
	up, _ := b.attach("up", Uplink, macUplink)
	d := b.r.domains["up"]
	hop64 := upstreamRA(goodRA)
	hop64[header.EthLen+7] = 64
	b.send(up, hop64)
	global := goodRA
	global.src = addr6("2001:db8:2::1")
	b.send(up, upstreamRA(global))
	if d.ip6.valid || b.r.Stats().IPv6Dropped[Drop6NDPInvalid].Load() != 2 {
		t.Fatalf("hop limit 64 or a global source taken: %+v, %d counted", d.ip6, b.r.Stats().IPv6Dropped[Drop6NDPInvalid].Load())
	}
	for name, o := range map[string]raOpts{
		"a /48":                 {prefix: upPrefix, pfxLen: 48, pfxFlags: header.PrefixL | header.PrefixA, valid: 3600, preferred: 1800},
		"not autonomous":        {prefix: upPrefix, pfxLen: 64, pfxFlags: header.PrefixL, valid: 3600, preferred: 1800},
		"link-local":            {prefix: addr6("fe80::"), pfxLen: 64, pfxFlags: header.PrefixA, valid: 3600, preferred: 1800},
		"preferred over valid":  {prefix: upPrefix, pfxLen: 64, pfxFlags: header.PrefixA, valid: 100, preferred: 1800},
		"valid lifetime 0":      {prefix: upPrefix, pfxLen: 64, pfxFlags: header.PrefixA},
		"MTU above the link's ": {mtu: 9000},
	} {
		b.send(up, upstreamRA(o))
		if d.ip6.valid || d.mtu6() != 1500 {
			t.Fatalf("RA with %s configured %+v, mtu %d", name, d.ip6, d.mtu6())
		}
	}
	b.send(up, upstreamRA(goodRA))
	other := goodRA
	other.src, other.prefix = addr6("fe80::66"), addr6("2001:db8:66::")
	b.send(up, upstreamRA(other))
	if d.ip6.gateway != gwLL6 || d.ip6.addr != upSLAAC {
		t.Fatalf("another router's RA taken: %+v", d.ip6)
	}
	before := b.r.Stats().IPv6Dropped[Drop6FromGuest].Load()
	b.send(vm, ndpFrame(vm.MAC(), header.MulticastMAC(header.AllNodes), func(p []byte) header.NDPBuilder {
		return header.StartRA(p, header.LinkLocal(vm.MAC()), header.AllNodes, header.RAFields{Lifetime: 1800})
	}))
	if b.r.Stats().IPv6Dropped[Drop6FromGuest].Load() != before+1 {
		t.Fatal("a guest's RA in the lan not dropped as before")
	}
}

// The uplink's link comes back (its session attaches again): the router solicits at once,
// and without an interface the domain forgets its SLAAC config.
func TestSLAACLinkComesBack(t *testing.T) {
	b := newBench(t, slaacConfig)
	up, _ := b.attach("up", Uplink, macUplink)
	b.send(up, upstreamRA(goodRA))
	b.r.Detach(up)
	if d := b.r.domains["up"]; d.ip6.valid || d.slaac.nextRS != 0 {
		t.Fatalf("config kept without interface: %+v", d.ip6)
	}
	_, upp := b.attach("up", Uplink, macUplink)
	if rs := ndpOf(t, upp.take(), header.NDPRouterSolicit); len(rs) != 1 {
		t.Fatalf("%d RSs when the link came back", len(rs))
	}
}

// dhcp6Of parses a sent DHCPv6 Information-Request: its IPv6 packet and message.
func dhcp6Of(t *testing.T, f []byte) (header.IPv6, header.DHCPv6) {
	t.Helper()
	e, ip, _ := sent6(t, f)
	seg := ip.Payload()
	if ip.NextHeader() != header.ProtoUDP || header.Ports(seg).Src() != header.DHCPv6ClientPort || header.Ports(seg).Dst() != header.DHCPv6ServerPort ||
		e.Dst() != header.MulticastMAC(header.AllDHCPAgents) || ip.Dst() != header.AllDHCPAgents ||
		header.Checksum(seg, header.PseudoSum6(ip.Src(), ip.Dst(), header.ProtoUDP, len(seg))) != 0 {
		t.Fatalf("not a DHCPv6 request: %x", f)
	}
	m, ok := header.NewDHCPv6(seg[header.UDPLen:])
	if !ok || m.Type() != header.DHCPv6InfoRequest {
		t.Fatalf("DHCPv6 message %x", seg[header.UDPLen:])
	}
	return ip, m
}

// dhcp6Reply is a server's Reply to xid.
func dhcp6Reply(xid uint32, dns [16]byte, refresh uint32) []byte {
	b := make([]byte, 200)
	w := header.StartDHCPv6(b, header.DHCPv6Reply, xid)
	w.Add(header.DHCPv6OptServerID, header.DUIDLL(macGateway))
	w.Add(header.DHCPv6OptClientID, header.DUIDLL(macUplink))
	w.Add(header.DHCPv6OptDNSServers, dns[:])
	w.Add(header.DHCPv6OptDomainList, []byte("\x07example\x03org\x00"))
	if refresh != 0 {
		w.Add(header.DHCPv6OptRefreshTime, binary.BigEndian.AppendUint32(nil, refresh))
	}
	return ip6Frame(macGateway, macUplink, gwLL6, upLL, header.ProtoUDP, 64, udp6(gwLL6, upLL, header.DHCPv6ServerPort, header.DHCPv6ClientPort, w.Bytes()))
}

// An RA with the O flag starts stateless DHCPv6: an Information-Request from the link-local
// address to ff02::1:2 within a second (client DUID, the options wanted, elapsed time 0),
// retransmitted with the same transaction ID at doubling intervals and a growing elapsed
// time; a Reply with another ID is dropped; the Reply's DNS servers join the RA's and go
// into the lan's RA at once; after the information refresh time the router asks again,
// with a new ID.
func TestDHCPv6Stateless(t *testing.T) {
	b := newBench(t, slaacConfig)
	_, vmp := b.attach("vm", Nic, header.MAC{})
	up, upp := b.attach("up", Uplink, macUplink)
	o := goodRA
	o.flags, o.dns = header.RAOther, nil
	b.send(up, upstreamRA(o))
	upp.take()
	var sends []time.Time
	var xid uint32
	var elapsed []uint16
	for len(sends) < 5 {
		b.clock.advance(time.Second)
		b.r.Tick()
		for _, f := range upp.take() {
			if header.Eth(f).Type() != header.EtherTypeIPv6 {
				continue
			}
			if _, ip, _ := sent6(t, f); ip.NextHeader() != header.ProtoUDP {
				continue
			}
			ip, m := dhcp6Of(t, f)
			if ip.Src() != upLL {
				t.Fatalf("Information-Request from %x", ip.Src())
			}
			if xid == 0 {
				xid = m.XID()
			} else if m.XID() != xid {
				t.Fatal("a retransmission with another transaction ID")
			}
			if id, _ := m.Option(header.DHCPv6OptClientID); string(id) != string(header.DUIDLL(macUplink)) {
				t.Fatalf("client ID %x", id)
			}
			if oro, _ := m.Option(header.DHCPv6OptORO); len(oro) != 8 || oro[1] != header.DHCPv6OptDNSServers {
				t.Fatalf("ORO %x", oro)
			}
			et, _ := m.Option(header.DHCPv6OptElapsedTime)
			elapsed = append(elapsed, binary.BigEndian.Uint16(et))
			sends = append(sends, b.clock.t)
		}
		if len(sends) == 0 && b.clock.t.Sub(time.Unix(1000, 0)) > time.Minute {
			t.Fatal("no Information-Request")
		}
	}
	if elapsed[0] != 0 || elapsed[4] <= elapsed[3] {
		t.Fatalf("elapsed times %v", elapsed)
	}
	// RT: about 1 s, then doubling (RAND +-0.1), seen through 1 s ticks.
	for k := 2; k < len(sends); k++ {
		prev, gap := sends[k-1].Sub(sends[k-2]), sends[k].Sub(sends[k-1])
		if gap < prev || gap > 2*prev+2*time.Second {
			t.Fatalf("retransmissions at %v", sends)
		}
	}
	vmp.take()
	b.send(up, dhcp6Reply(xid+1, upstream6, 0))
	if len(b.r.domains["up"].dns6()) != 0 {
		t.Fatal("a Reply with another transaction ID taken")
	}
	b.clock.advance(3 * time.Second) // RFC 4861's 3 s since the lan's last RA
	b.send(up, dhcp6Reply(xid, upstream6, 1000))
	c := &b.r.domains["up"].slaac.dhcp
	if dns := b.r.domains["up"].dns6(); len(dns) != 1 || dns[0] != netip.AddrFrom16(upstream6) || len(c.domains) != 1 || c.domains[0] != "example.org" {
		t.Fatalf("DHCPv6 gave %v %v", dns, c.domains)
	}
	ras := ndpOf(t, vmp.take(), header.NDPRouterAdvert)
	if len(ras) != 1 || rdnssOf(ras[0])[netip.AddrFrom16(upstream6)] == 0 {
		t.Fatal("the lan's RA lacks the DNS server DHCPv6 gave")
	}
	b.clock.advance(999 * time.Second)
	b.r.Tick()
	upp.take()
	b.clock.advance(2 * time.Second)
	b.r.Tick()
	sent := upp.take()
	if len(sent) != 1 {
		t.Fatalf("%d frames at the information refresh time", len(sent))
	}
	if _, m := dhcp6Of(t, sent[0]); m.XID() == xid {
		t.Fatal("a new exchange with the old transaction ID")
	}
}

// DNS servers the uplink loses are withdrawn in the lan's next RA with lifetime 0 (RFC 8106
// 5.1), and while the uplink has none the lan's RAs carry no RDNSS.
func TestRDNSSFollowsUplink(t *testing.T) {
	b := newBench(t, slaacConfig)
	_, vmp := b.attach("vm", Nic, header.MAC{})
	up, _ := b.attach("up", Uplink, macUplink)
	b.send(up, upstreamRA(goodRA))
	vmp.take()
	b.clock.advance(5 * time.Second)
	next := goodRA
	next.dns = [][16]byte{addr6("2001:db8:2::54")}
	b.send(up, upstreamRA(next))
	ras := ndpOf(t, vmp.take(), header.NDPRouterAdvert)
	if len(ras) != 1 {
		t.Fatalf("%d RAs after the uplink's DNS server changed", len(ras))
	}
	got := rdnssOf(ras[0])
	if life, ok := got[netip.AddrFrom16(upstream6)]; !ok || life != 0 || got[netip.MustParseAddr("2001:db8:2::54")] != 90 {
		t.Fatalf("RDNSS after a change: %v", got)
	}
	// The RDNSS lifetime ends: the next RA withdraws it, those after have none.
	b.clock.advance(601 * time.Second)
	for k := 0; k < 40; k++ {
		b.clock.advance(time.Second)
		b.r.Tick()
	}
	ras = ndpOf(t, vmp.take(), header.NDPRouterAdvert)
	if len(ras) < 2 {
		t.Fatalf("%d RAs in 40 s", len(ras))
	}
	if got := rdnssOf(ras[0]); len(got) != 1 || got[netip.MustParseAddr("2001:db8:2::54")] != 0 {
		t.Fatalf("RDNSS %v when the uplink's ended", got)
	}
	for _, ra := range ras[1:] {
		if len(rdnssOf(ra)) != 0 {
			t.Fatalf("RDNSS %v after the uplink's ended", rdnssOf(ra))
		}
	}
}

// A reconfiguration keeps the SLAAC config, the router followed and the NAT66 links, and
// sends no RS while a router is followed.
func TestSLAACKeptByReconfiguration(t *testing.T) {
	b := newBench(t, slaacConfig)
	vm, _ := b.attach("vm", Nic, header.MAC{})
	up, upp := b.attach("up", Uplink, macUplink)
	b.send(up, upstreamRA(goodRA))
	vm6 := addr6("2001:db8:1::5")
	b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, far6, header.ProtoUDP, 64, udp6(vm6, far6, 5000, 53, []byte("q"))))
	upp.take()
	b.r.Configure(modelOf(t, strings.Replace(slaacConfig, `udp-ports="4"`, `udp-ports="5"`, 1)))
	d := b.r.domains["up"]
	if d.ip6.addr != upSLAAC || d.ip6.gateway != gwLL6 || len(b.r.links) != 1 || len(d.dns6()) != 1 {
		t.Fatalf("after reconfiguring: %+v, %d links, DNS %v", d.ip6, len(b.r.links), d.dns6())
	}
	if rs := ndpOf(t, upp.take(), header.NDPRouterSolicit); len(rs) != 0 {
		t.Fatal("RS at a reconfiguration while a router is followed")
	}
}

// FuzzSLAACUplink is FuzzRouterFrame on a router whose uplink takes its IPv6 config by SLAAC
// and DHCPv6, seeded with the upstream router's RAs, a DHCPv6 Reply, a NATed flow and its
// answer; a router restarted on the state region must find the same SLAAC config and
// links.
func FuzzSLAACUplink(f *testing.F) {
	seed := func(ifc byte, flags byte, frames ...[]byte) []byte {
		var out []byte
		for _, fr := range frames {
			if len(fr) > 255 {
				fr = fr[:255]
			}
			out = append(out, ifc, flags, byte(len(fr)))
			out = append(out, fr...)
		}
		return out
	}
	vmMAC := header.MAC{2, 2, 2, 2, 2, 1}
	vm6 := addr6("2001:db8:1::5")
	o := goodRA
	o.flags = header.RAOther
	flow := ip6Frame(vmMAC, routerMACNic, vm6, far6, header.ProtoUDP, 64, udp6(vm6, far6, 5000, 53, []byte("q")))
	answer := ip6Frame(macGateway, macUplink, far6, upSLAAC, header.ProtoUDP, 64, udp6(far6, upSLAAC, 53, 49152, []byte("a")))
	f.Add(append(seed(1, 0, upstreamRA(o)), seed(0, 0, flow)...))
	f.Add(append(append(seed(1, 2, upstreamRA(o)), seed(0, 0, flow)...), seed(1, 0, answer, dhcp6Reply(0x6e6964, upstream6, 0))...))
	f.Add(seed(1, 2, upstreamRA(raOpts{routerLife: 60}), upstreamRA(goodRA)))
	short := goodRA
	short.valid, short.preferred = 5, 5
	f.Add(append(seed(1, 2, upstreamRA(short)), seed(0, 2, flow, flow)...))
	cfg := strings.Replace(slaacConfig, `label="up"`, `label="uplink"`, 1)
	cfg = strings.Replace(cfg, `verbose_packet_drop="yes"`, ``, 1)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzFrames(t, cfg, data, true) })
}

// dhcpv6="always" asks by DHCPv6 as the link comes up, without an RA; dhcpv6="no" never,
// whatever the RA's flags.
func TestDHCPv6AlwaysOrNever(t *testing.T) {
	for _, mode := range []string{"always", "no"} {
		b := newBench(t, strings.Replace(slaacConfig, `interface_ipv6="slaac"`, `interface_ipv6="slaac" dhcpv6="`+mode+`"`, 1))
		up, upp := b.attach("up", Uplink, macUplink)
		if mode == "no" {
			o := goodRA
			o.flags = header.RAOther | header.RAManaged
			b.send(up, upstreamRA(o))
		}
		requests := 0
		for k := 0; k < 3; k++ {
			b.clock.advance(time.Second)
			b.r.Tick()
			for _, f := range upp.take() {
				if _, ip, _ := sent6(t, f); ip.NextHeader() == header.ProtoUDP {
					dhcp6Of(t, f)
					requests++
				}
			}
		}
		if (mode == "always") != (requests > 0) {
			t.Fatalf("dhcpv6=%q: %d Information-Requests", mode, requests)
		}
	}
}

// upstreamConfig is a second router on the uplink's wire, the upstream one: its <ra>
// announces 2001:db8:2::/64 and a DNS server.
const upstreamConfig = `<config>
  <policy label="down" domain="down"/>
  <domain name="down" interface="198.18.0.1/24" interface_ipv6="2001:db8:2::1/64">
    <ra max_interval_sec="30"><dns-server ip="2001:db8:2::53"/></ra>
  </domain>
</config>`

// Two routers on one wire: the upstream one's <ra> configures the other's SLAAC uplink
// (address, gateway, its DNS server carried on into the lan's RA), and a VM's echo request
// to the upstream router's address goes out NATed and its reply comes back. Each router's
// frames reach the other by a pump, as a wire would carry them.
func TestSLAACFromUpstreamRouter(t *testing.T) {
	a := newBench(t, upstreamConfig)
	b := newBench(t, slaacConfig)
	macA := header.MAC{2, 0, 0, 0, 0, 0xa}
	down, downp := a.attach("down", Uplink, macA)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	up, upp := b.attach("up", Uplink, macUplink)
	vm6 := addr6("2001:db8:1::5")
	b.r.domains["lan"].nd[vm6] = vm.MAC()
	pump := func() {
		for n := 0; n < 100 && len(downp.sent)+len(upp.sent) > 0; n++ {
			for _, f := range downp.take() {
				b.send(up, f)
			}
			for _, f := range upp.take() {
				a.send(down, f)
			}
		}
	}
	for k := 0; k < 5; k++ {
		pump()
		a.clock.advance(time.Second)
		b.clock.advance(time.Second)
		a.r.Tick()
		b.r.Tick()
	}
	pump()
	d := b.r.domains["up"]
	if !d.ip6.valid || d.ip6.addr != upSLAAC || d.ip6.gateway != header.LinkLocal(macA) || d.ip6.prefix.String() != "2001:db8:2::/64" {
		t.Fatalf("the uplink's SLAAC config from the upstream router: %+v\n%s", d.ip6, b.log)
	}
	var dns bool
	for _, ra := range ndpOf(t, vmp.take(), header.NDPRouterAdvert) {
		dns = dns || rdnssOf(ra)[netip.MustParseAddr("2001:db8:2::53")] != 0
	}
	if !dns {
		t.Fatal("the lan's RAs lack the upstream router's DNS server")
	}
	upstream := addr6("2001:db8:2::1")
	b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, upstream, header.ProtoICMPv6, 64, echo6(vm6, upstream, 8)))
	pump()
	sent := vmp.take()
	if len(sent) != 1 {
		t.Fatalf("%d frames back for the echo request", len(sent))
	}
	if _, ip, m := sent6(t, sent[0]); m == nil || m.Type() != header.ICMPv6EchoReply || ip.Src() != upstream || ip.Dst() != vm6 {
		t.Fatalf("echo reply %x", sent[0])
	}
}

// The SLAAC config survives a restart on the state region, and with it the NAT66 link to
// its address: the restarted router has the same address, gateway, lifetimes and RDNSS
// before any RA, sends no RS (a router is followed), and the flow's reply passes.
func TestSLAACSurvivesRestart(t *testing.T) {
	mem := make([]byte, region.Size(64))
	b := keptBench(t, slaacConfig, mem, nil)
	vm, _ := b.attach("vm", Nic, header.MAC{})
	up, upp := b.attach("up", Uplink, macUplink)
	vm6 := addr6("2001:db8:1::5")
	b.send(up, upstreamRA(goodRA))
	b.r.domains["lan"].nd[vm6] = vm.MAC()
	upp.take()
	b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, far6, header.ProtoUDP, 64, udp6(vm6, far6, 5000, 53, []byte("q"))))
	_, port, _ := out6(t, upp)
	before := keptState(b.r)

	b2 := keptBench(t, slaacConfig, bytes.Clone(mem), b.clock)
	if got := keptState(b2.r); got != before || !strings.Contains(b2.log.String(), "slaac_configs=1") {
		t.Fatalf("restarted with\n%s\nhad\n%s\nlog:\n%s", got, before, b2.log)
	}
	vm, vmp := b2.attach("vm", Nic, header.MAC{})
	up, upp = b2.attach("up", Uplink, macUplink)
	if rs := ndpOf(t, upp.take(), header.NDPRouterSolicit); len(rs) != 0 {
		t.Fatal("RS after a restart that restored the router followed")
	}
	b2.r.domains["lan"].nd[vm6] = vm.MAC()
	b2.r.domains["up"].nd[gwLL6] = macGateway
	vmp.take()
	b2.send(up, ip6Frame(macGateway, macUplink, far6, upSLAAC, header.ProtoUDP, 64, udp6(far6, upSLAAC, 53, port, []byte("a"))))
	if ip, _, dport := out6(t, vmp); ip.Dst() != vm6 || dport != 5000 {
		t.Fatalf("reply reached %x:%d after the restart", ip.Dst(), dport)
	}
	if dns := b2.r.domains["up"].dns6(); len(dns) != 1 || dns[0] != netip.AddrFrom16(upstream6) {
		t.Fatalf("RDNSS after the restart: %v", dns)
	}
}

// A SLAAC record SLAAC could not have made, or whose address has expired, is not restored
// (the domain solicits instead); a good one is.
func TestSLAACRestoreChecks(t *testing.T) {
	good := region.SLAAC{Domain: region.NameOf("up"), Addr: upSLAAC, PrefixBits: 64, Gateway: gwLL6, HasGateway: true,
		ValidEnd: time.Unix(5000, 0).UnixNano(), PreferredEnd: time.Unix(4000, 0).UnixNano(), RouterEnd: time.Unix(3000, 0).UnixNano(), MTU: 1400}
	for name, change := range map[string]func(*region.SLAAC){
		"good":                    func(*region.SLAAC) {},
		"a link-local address":    func(c *region.SLAAC) { c.Addr = header.LinkLocal(macUplink) },
		"a /48":                   func(c *region.SLAAC) { c.PrefixBits = 48 },
		"expired":                 func(c *region.SLAAC) { c.ValidEnd = time.Unix(999, 0).UnixNano() },
		"a global gateway":        func(c *region.SLAAC) { c.Gateway = addr6("2001:db8:2::1") },
		"an MTU above the link's": func(c *region.SLAAC) { c.MTU = 9000 },
		"another domain":          func(c *region.SLAAC) { c.Domain = region.NameOf("lan") },
	} {
		mem := make([]byte, region.Size(8))
		reg, _, err := region.Open(mem)
		if err != nil {
			t.Fatal(err)
		}
		rec := good
		change(&rec)
		reg.Put(region.None, &rec)
		b := keptBench(t, slaacConfig, mem, nil)
		if d := b.r.domains["up"]; d.ip6.valid != (name == "good") {
			t.Errorf("%s: restored %v", name, d.ip6.valid)
		}
	}
}
