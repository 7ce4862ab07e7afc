package router

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
)

// dualConfig is a dual-stack router: a lan of Nic sessions with RAs, an uplink whose
// gateway is link-local, and IPv6 rules both ways (routed, no NAT).
const dualConfig = `<config verbose_packet_drop="yes">
  <policy label_prefix="vm" domain="lan"/> <policy label="up" domain="up"/>
  <domain name="lan" interface="10.0.1.1/24" interface_ipv6="2001:db8:1::1/64">
    <tcp dst="2001:db8:2::/64"><permit port="80" domain="up"/></tcp>
    <udp dst="::/0"><permit-any domain="up"/></udp>
    <icmp dst="::/0" domain="up"/>
    <ra max_interval_sec="30"><dns-server ip="2001:db8:2::53"/></ra>
  </domain>
  <domain name="up" interface="198.18.0.10/24" interface_ipv6="2001:db8:2::2/64" gateway_ipv6="fe80::1" mtu="1280">
    <ip dst="2001:db8:1::/64" domain="lan"/>
  </domain>
</config>`

func addr6(s string) [16]byte { return netip.MustParseAddr(s).As16() }

var (
	vm6      = addr6("2001:db8:1::5")
	router6  = addr6("2001:db8:1::1")
	server6  = addr6("2001:db8:2::5")
	gwLL6    = addr6("fe80::1")
	routerLL = header.LinkLocal(routerMACNic)
)

// ip6Frame is an IPv6 frame with payload (extension headers and upper layer) after next
// header nh.
func ip6Frame(srcMAC, dstMAC header.MAC, src, dst [16]byte, nh, hops uint8, payload []byte) []byte {
	b := make([]byte, header.IPv6Len+len(payload))
	header.PutIPv6(b, len(payload), nh, hops, src, dst)
	copy(b[header.IPv6Len:], payload)
	return ethFrame(srcMAC, dstMAC, header.EtherTypeIPv6, b)
}

// udp6 is a UDP segment with a valid checksum.
func udp6(src, dst [16]byte, sport, dport uint16, data []byte) []byte {
	seg := make([]byte, header.UDPLen+len(data))
	header.Ports(seg).SetSrc(sport)
	header.Ports(seg).SetDst(dport)
	binary.BigEndian.PutUint16(seg[4:], uint16(len(seg)))
	copy(seg[header.UDPLen:], data)
	binary.BigEndian.PutUint16(seg[6:], header.Checksum(seg, header.PseudoSum6(src, dst, header.ProtoUDP, len(seg))))
	return seg
}

func echo6(src, dst [16]byte, n int) []byte {
	m := make([]byte, header.ICMPv6Len+n)
	header.PutICMPv6Echo(m, header.ICMPv6EchoRequest, 7, 1, src, dst)
	return m
}

// ndpFrame builds an NDP frame by build, which starts the message in b and adds options.
func ndpFrame(srcMAC, dstMAC header.MAC, build func(b []byte) header.NDPBuilder) []byte {
	b := make([]byte, 200)
	w := build(b)
	return ethFrame(srcMAC, dstMAC, header.EtherTypeIPv6, w.Finish())
}

// sent6 parses a sent IPv6 frame: the packet and, for ICMPv6, the message (checksum checked).
func sent6(t *testing.T, f []byte) (header.Eth, header.IPv6, header.ICMPv6) {
	t.Helper()
	e := header.Eth(f)
	if e.Type() != header.EtherTypeIPv6 {
		t.Fatalf("sent a frame of type %#x, not IPv6", e.Type())
	}
	ip, ok := header.NewIPv6(e.Payload())
	if !ok {
		t.Fatal("bad IPv6 in a sent frame")
	}
	if ip.NextHeader() != header.ProtoICMPv6 {
		return e, ip, nil
	}
	m := header.ICMPv6(ip.Payload())
	if !m.ChecksumValid(ip.Src(), ip.Dst()) {
		t.Fatal("bad ICMPv6 checksum in a sent frame")
	}
	return e, ip, m
}

// ip6Bench attaches vm and up; past their DAD window, with the VM's and the gateway's MAC
// known.
func ip6Bench(t *testing.T) (*bench, *Interface, *fakePort, *Interface, *fakePort) {
	b := newBench(t, dualConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	up, upp := b.attach("up", Uplink, macUplink)
	b.clock.advance(2 * time.Second)
	b.send(vm, ndpFrame(vm.MAC(), routerMACNic, func(p []byte) header.NDPBuilder {
		w := header.StartNS(p, vm6, router6, router6)
		w.LinkAddr(header.NDPOptSourceLinkAddr, vm.MAC())
		return w
	}))
	b.r.domains["up"].nd[gwLL6] = macGateway
	vmp.take()
	upp.take()
	return b, vm, vmp, up, upp
}

// The router's identity at a joining interface: DAD for its link-local and global address
// (from ::, to the solicited-node group and its 33:33 MAC); an NA for one of them, or another
// node's DAD for it, within the DAD window marks it taken (logged; echo no longer answered
// there); after the window another node's DAD is defended with an NA to all nodes.
func TestIPv6DAD(t *testing.T) {
	b := newBench(t, dualConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	sent := vmp.take()
	var targets []netip.Addr
	for _, f := range sent {
		e, ip, m := sent6(t, f)
		n := header.NDP(m)
		if n.Type() != header.NDPNeighborSolicit || !header.IsUnspecified6(ip.Src()) || ip.Dst() != header.SolicitedNode(n.Target()) ||
			e.Dst() != header.MulticastMAC(ip.Dst()) || len(n.Options()) != 0 {
			t.Fatalf("DAD frame %x", f)
		}
		targets = append(targets, netip.AddrFrom16(n.Target()))
	}
	if len(targets) != 2 || targets[0] != netip.AddrFrom16(routerLL) || targets[1].String() != "2001:db8:1::1" {
		t.Fatalf("DAD for %v, want the link-local and global address", targets)
	}
	// Another node answers for the global address within the window: taken.
	b.send(vm, ndpFrame(vm.MAC(), header.MulticastMAC(header.AllNodes), func(p []byte) header.NDPBuilder {
		w := header.StartNA(p, router6, header.AllNodes, router6, header.NAOverride)
		w.LinkAddr(header.NDPOptTargetLinkAddr, vm.MAC())
		return w
	}))
	if !b.r.domains["lan"].ip6.dup || !strings.Contains(b.log.String(), "IPv6 duplicate address") {
		t.Fatalf("NA for the router's address in the DAD window not taken as a duplicate:\n%s", b.log)
	}
	b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, router6, header.ProtoICMPv6, 64, echo6(vm6, router6, 8)))
	for _, f := range vmp.take() {
		if _, _, m := sent6(t, f); m.Type() == header.ICMPv6EchoReply {
			t.Fatal("echo answered at a duplicate address")
		}
	}
	// Another node's DAD for the link-local address within the window: taken as well.
	dad := ndpFrame(vm.MAC(), header.MulticastMAC(header.SolicitedNode(routerLL)), func(p []byte) header.NDPBuilder {
		return header.StartNS(p, [16]byte{}, header.SolicitedNode(routerLL), routerLL)
	})
	b.send(vm, dad)
	if !vm.llDup {
		t.Fatal("NS from :: for the link-local address in the DAD window not taken as a duplicate")
	}

	// After the window, the next interface's link-local address is defended.
	vm2, vm2p := b.attach("vm2", Nic, header.MAC{})
	vm2p.take()
	b.clock.advance(2 * time.Second)
	b.send(vm2, dad)
	sent = vm2p.take()
	if len(sent) != 1 {
		t.Fatalf("%d frames after another node's DAD for the router's address, want a defending NA", len(sent))
	}
	_, ip, m := sent6(t, sent[0])
	n := header.NDP(m)
	if n.Type() != header.NDPNeighborAdvert || ip.Dst() != header.AllNodes || n.Target() != routerLL || n.NAFlags()&header.NASolicit != 0 || vm2.llDup {
		t.Fatalf("defence %x", sent[0])
	}
}

// An NS for the router's address is answered with a solicited NA (router, override) with its
// MAC, and teaches the cache the sender; one with a hop limit other than 255 (RFC 4861 7.1.1)
// is dropped and counted, as is every NDP message CheckNDP refuses.
func TestIPv6NSGetsNA(t *testing.T) {
	b := newBench(t, dualConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	b.clock.advance(2 * time.Second)
	vmp.take()
	ns := func(hops uint8) []byte {
		f := ndpFrame(vm.MAC(), routerMACNic, func(p []byte) header.NDPBuilder {
			w := header.StartNS(p, vm6, header.SolicitedNode(router6), router6)
			w.LinkAddr(header.NDPOptSourceLinkAddr, vm.MAC())
			return w
		})
		f[header.EthLen+7] = hops
		return f
	}
	b.send(vm, ns(64))
	if len(vmp.take()) != 0 || b.r.Stats().IPv6Dropped[Drop6NDPInvalid].Load() != 1 {
		t.Fatal("NS with hop limit 64 answered or not counted")
	}
	b.send(vm, ns(255))
	sent := vmp.take()
	if len(sent) != 1 {
		t.Fatalf("%d frames for an NS, want an NA", len(sent))
	}
	e, ip, m := sent6(t, sent[0])
	n := header.NDP(m)
	o, _ := n.Options().Find(header.NDPOptTargetLinkAddr)
	mac, _ := o.LinkAddr()
	if n.Type() != header.NDPNeighborAdvert || n.Target() != router6 || ip.Src() != router6 || ip.Dst() != vm6 || ip.HopLimit() != 255 ||
		n.NAFlags() != header.NARouter|header.NASolicit|header.NAOverride || mac != routerMACNic || e.Dst() != vm.MAC() {
		t.Fatalf("NA %x", sent[0])
	}
	if b.r.domains["lan"].nd[vm6] != vm.MAC() {
		t.Fatal("the soliciting node is not in the neighbour cache")
	}
}

// An RS gets an RA: unicast to a node with an address, to all nodes for one without (at most
// every 3 s), from the router's link-local address, with the prefix (on-link, autonomous),
// the domain's MTU, RDNSS and the router lifetime; Tick sends unsolicited ones; an RA or
// redirect from a guest is dropped, counted and not passed on.
func TestIPv6RouterAdvertisements(t *testing.T) {
	b := newBench(t, dualConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	_, vm2p := b.attach("vm2", Nic, header.MAC{})
	b.clock.advance(2 * time.Second)
	vmp.take()
	vm2p.take()
	vmLL := header.LinkLocal(vm.MAC())
	rs := func(src [16]byte) []byte {
		return ndpFrame(vm.MAC(), header.MulticastMAC(header.AllRouters), func(p []byte) header.NDPBuilder {
			w := header.StartRS(p, src, header.AllRouters)
			if !header.IsUnspecified6(src) {
				w.LinkAddr(header.NDPOptSourceLinkAddr, vm.MAC())
			}
			return w
		})
	}
	check := func(f []byte, dst [16]byte) {
		t.Helper()
		_, ip, m := sent6(t, f)
		n := header.NDP(m)
		if n.Type() != header.NDPRouterAdvert || ip.Src() != routerLL || ip.Dst() != dst || n.RouterLifetime() != 90 || n.CurHopLimit() != 64 {
			t.Fatalf("RA %x", f)
		}
		if err := header.CheckNDP(ip, new(header.WalkIPv6(ip))); err != nil {
			t.Fatal(err)
		}
		po, _ := n.Options().Find(header.NDPOptPrefixInfo)
		p, _ := po.Prefix()
		mo, _ := n.Options().Find(header.NDPOptMTU)
		mtu, _ := mo.MTU()
		ro, _ := n.Options().Find(header.NDPOptRDNSS)
		life, k, _ := ro.RDNSS()
		if p.Len != 64 || p.Flags != header.PrefixL|header.PrefixA || p.Prefix != addr6("2001:db8:1::") || mtu != 1500 ||
			k != 1 || ro.RDNSSAddr(0) != addr6("2001:db8:2::53") || life != 90 {
			t.Fatalf("RA options: prefix %+v, mtu %d, rdnss %d×%x life %d", p, mtu, k, ro, life)
		}
	}
	b.send(vm, rs(vmLL))
	sent := vmp.take()
	if len(sent) != 1 {
		t.Fatalf("%d frames for an RS", len(sent))
	}
	check(sent[0], vmLL)
	b.send(vm, rs([16]byte{}))
	if sent = vmp.take(); len(sent) != 1 {
		t.Fatalf("%d frames for an RS from ::", len(sent))
	}
	check(sent[0], header.AllNodes)
	b.send(vm, rs([16]byte{}))
	if n := len(vmp.take()); n != 0 {
		t.Fatalf("%d RAs to all nodes within 3 s", n)
	}
	// The unsolicited RAs: due at the first Tick after joining, then at most 16 s apart.
	for k := 0; k < 3; k++ {
		for n := 0; n < 16 && len(vm2p.sent) == 0; n++ {
			b.clock.advance(time.Second)
			b.r.Tick()
		}
		if sent = vm2p.take(); len(sent) != 1 {
			t.Fatalf("unsolicited RA %d: %d frames", k, len(sent))
		}
		check(sent[0], header.AllNodes)
		vmp.take()
	}
	// A guest's RA is neither taken nor passed on.
	ra := ndpFrame(vm.MAC(), header.MulticastMAC(header.AllNodes), func(p []byte) header.NDPBuilder {
		return header.StartRA(p, vmLL, header.AllNodes, header.RAFields{Lifetime: 1800})
	})
	b.send(vm, ra)
	if len(vm2p.take()) != 0 || b.r.Stats().IPv6Dropped[Drop6FromGuest].Load() != 1 {
		t.Fatal("a guest's RA was passed on or not counted")
	}
}

// Echo requests to the router's global and link-local addresses are answered; other ICMPv6
// messages to the router are dropped silently, and UDP to it gets port unreachable.
func TestIPv6Echo(t *testing.T) {
	b, vm, vmp, _, _ := ip6Bench(t)
	reply := echo6(vm6, router6, 8)
	reply[0] = header.ICMPv6EchoReply
	header.ICMPv6(reply).UpdateChecksum(vm6, router6)
	b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, router6, header.ProtoICMPv6, 64, reply))
	if n := len(vmp.take()); n != 0 {
		t.Fatalf("%d frames for an echo reply to the router", n)
	}
	b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, router6, header.ProtoUDP, 64, udp6(vm6, router6, 5000, 9, nil)))
	if sent := vmp.take(); len(sent) != 1 {
		t.Fatalf("%d frames for UDP to the router", len(sent))
	} else if _, _, m := sent6(t, sent[0]); m.Type() != header.ICMPv6DestUnreach || m.Code() != header.ICMPv6PortUnreachable {
		t.Fatalf("UDP to the router: type %d code %d", m.Type(), m.Code())
	}
	for _, to := range [][16]byte{router6, routerLL} {
		from := vm6
		if to == routerLL {
			from = header.LinkLocal(vm.MAC())
		}
		b.send(vm, ip6Frame(vm.MAC(), routerMACNic, from, to, header.ProtoICMPv6, 64, echo6(from, to, 32)))
		sent := vmp.take()
		if len(sent) != 1 {
			t.Fatalf("%d frames for an echo request to %x", len(sent), to)
		}
		e, ip, m := sent6(t, sent[0])
		if m.Type() != header.ICMPv6EchoReply || ip.Src() != to || ip.Dst() != from || e.Dst() != vm.MAC() || m.ID() != 7 || len(m) != 40 {
			t.Fatalf("echo reply %x", sent[0])
		}
	}
}

// Routed forwarding between two domains, no NAT: the first packet waits for the neighbour
// (an NS to its solicited-node group), the NA sends it on with the hop limit one less and
// the addresses as they were; the way back has a rule of its own. What no rule covers gets
// destination unreachable (no route), a port a rule does not permit administratively
// prohibited; hop limit 1 gets time exceeded; a packet over the egress mtu packet too big
// with that MTU.
func TestIPv6Routed(t *testing.T) {
	b, vm, vmp, up, upp := ip6Bench(t)
	// Through the gateway (off-link), known.
	far := addr6("2001:db8:9::9")
	udp := ip6Frame(vm.MAC(), routerMACNic, vm6, far, header.ProtoUDP, 64, udp6(vm6, far, 5000, 53, []byte("q")))
	if v := b.send(vm, udp); v != Done {
		t.Fatal("held a frame to a known gateway")
	}
	sent := upp.take()
	if len(sent) != 1 {
		t.Fatalf("%d frames out", len(sent))
	}
	e, ip, _ := sent6(t, sent[0])
	if e.Dst() != macGateway || e.Src() != macUplink || ip.HopLimit() != 63 || ip.Src() != vm6 || ip.Dst() != far {
		t.Fatalf("forwarded %x", sent[0])
	}

	// On-link in up: an NS first, the frame held until the NA.
	tcp := make([]byte, 20)
	header.Ports(tcp).SetSrc(4000)
	header.Ports(tcp).SetDst(80)
	syn := ip6Frame(vm.MAC(), routerMACNic, vm6, server6, header.ProtoTCP, 64, tcp)
	if v := b.send(vm, syn); v != Held {
		t.Fatal("frame to an unknown neighbour not held")
	}
	sent = upp.take()
	if len(sent) != 1 {
		t.Fatalf("%d frames for resolution", len(sent))
	}
	_, ip, m := sent6(t, sent[0])
	if n := header.NDP(m); n.Type() != header.NDPNeighborSolicit || n.Target() != server6 || ip.Dst() != header.SolicitedNode(server6) ||
		ip.Src() != addr6("2001:db8:2::2") {
		t.Fatalf("NS %x", sent[0])
	}
	b.send(up, ndpFrame(macServer, macUplink, func(p []byte) header.NDPBuilder {
		w := header.StartNA(p, server6, addr6("2001:db8:2::2"), server6, header.NASolicit|header.NAOverride)
		w.LinkAddr(header.NDPOptTargetLinkAddr, macServer)
		return w
	}))
	sent = upp.take()
	if len(sent) != 1 {
		t.Fatalf("%d frames after the NA, want the held SYN", len(sent))
	}
	if e, ip, _ := sent6(t, sent[0]); e.Dst() != macServer || ip.HopLimit() != 63 {
		t.Fatalf("released %x", sent[0])
	}
	// And back, by up's <ip> rule.
	back := ip6Frame(macServer, macUplink, server6, vm6, header.ProtoTCP, 64, tcp)
	b.send(up, back)
	if sent = vmp.take(); len(sent) != 1 || header.Eth(sent[0]).Dst() != vm.MAC() {
		t.Fatalf("way back: %x", sent)
	}

	unreach := func(name string, f []byte, typ, code uint8, param uint32, why Drop6) {
		t.Helper()
		before := b.r.Stats().IPv6Dropped[why].Load()
		b.send(vm, f)
		sent := vmp.take()
		if len(sent) != 1 || len(upp.take()) != 0 {
			t.Fatalf("%s: %d frames back", name, len(sent))
		}
		_, ip, m := sent6(t, sent[0])
		if m.Type() != typ || m.Code() != code || m.MTU() != param || ip.Src() != router6 || ip.Dst() != vm6 {
			t.Fatalf("%s: type %d code %d param %d from %x", name, m.Type(), m.Code(), m.MTU(), ip.Src())
		}
		if b.r.Stats().IPv6Dropped[why].Load() != before+1 {
			t.Fatalf("%s: not counted as %s", name, why)
		}
	}
	header.Ports(tcp).SetDst(22)
	unreach("port not permitted", ip6Frame(vm.MAC(), routerMACNic, vm6, server6, header.ProtoTCP, 64, tcp),
		header.ICMPv6DestUnreach, header.ICMPv6AdminProhibited, 0, Drop6NoRule)
	unreach("no rule", ip6Frame(vm.MAC(), routerMACNic, vm6, addr6("2001:db8:3::1"), header.ProtoTCP, 64, tcp),
		header.ICMPv6DestUnreach, header.ICMPv6NoRoute, 0, Drop6NoRule)
	unreach("hop limit 1", ip6Frame(vm.MAC(), routerMACNic, vm6, far, header.ProtoUDP, 1, udp6(vm6, far, 5000, 53, nil)),
		header.ICMPv6TimeExceeded, header.ICMPv6HopLimitExceeded, 0, Drop6HopLimit)
	big := make([]byte, 1300)
	unreach("over up's mtu", ip6Frame(vm.MAC(), routerMACNic, vm6, far, header.ProtoUDP, 64, udp6(vm6, far, 5000, 53, big)),
		header.ICMPv6PacketTooBig, 0, 1280, Drop6TooBig)
}

// Hostile input is dropped, each for its counted reason: extension header chains that are
// unknown, out of order or repeated, routing type 0, fragments; no ICMPv6 error answers
// them. A flood of solicitations from ever new sources keeps the neighbour cache within its
// bound. ICMPv6 errors are rate limited.
func TestIPv6Hostile(t *testing.T) {
	b, vm, vmp, _, upp := ip6Bench(t)
	far := addr6("2001:db8:9::9")
	ext := func(nh uint8, next uint8, body ...byte) []byte {
		h := make([]byte, 8)
		h[0] = next
		copy(h[2:], body)
		return h
	}
	udp := udp6(vm6, far, 5000, 53, []byte("q"))
	for _, c := range []struct {
		name    string
		nh      uint8
		payload []byte
		why     Drop6
	}{
		{"unknown next header", 253, udp, Drop6Chain},
		{"hop-by-hop not first", header.ProtoDstOpts, append(ext(0, header.ProtoHopByHop), append(ext(0, header.ProtoUDP), udp...)...), Drop6Chain},
		{"destination options thrice", header.ProtoDstOpts, append(append(ext(0, header.ProtoDstOpts), ext(0, header.ProtoDstOpts)...), append(ext(0, header.ProtoUDP), udp...)...), Drop6Chain},
		{"routing type 0", header.ProtoRouting, append(ext(0, header.ProtoUDP, 0, 0, 1), udp...), Drop6RoutingType0},
		{"fragment", header.ProtoFragment, append([]byte{header.ProtoUDP, 0, 0, 1, 0, 0, 0, 9}, udp...), Drop6Fragment},
		{"truncated", header.ProtoDstOpts, []byte{header.ProtoUDP, 4}, Drop6Chain},
	} {
		before := b.r.Stats().IPv6Dropped[c.why].Load()
		b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, far, c.nh, 64, c.payload))
		if n, m := len(vmp.take()), len(upp.take()); n != 0 || m != 0 || b.r.Stats().IPv6Dropped[c.why].Load() != before+1 {
			t.Errorf("%s: %d frames back, %d out, counted %d", c.name, n, m, b.r.Stats().IPv6Dropped[c.why].Load()-before)
		}
	}

	for k := 0; k < 3*maxARPEntries; k++ {
		src := vm6
		binary.BigEndian.PutUint32(src[12:], uint32(k))
		mac := header.MAC{2, 9, 0, byte(k >> 16), byte(k >> 8), byte(k)}
		b.r.Handle(vm, ndpFrame(mac, routerMACNic, func(p []byte) header.NDPBuilder {
			w := header.StartNS(p, src, router6, router6)
			w.LinkAddr(header.NDPOptSourceLinkAddr, mac)
			return w
		}), nil, 0)
	}
	b.r.Flush()
	vmp.take()
	if n := len(b.r.domains["lan"].nd); n > maxARPEntries || b.r.Stats().NeighborEvictions.Load() < 2*maxARPEntries {
		t.Fatalf("neighbour cache of %d entries after a flood, %d evictions", n, b.r.Stats().NeighborEvictions.Load())
	}

	// 30 unroutable packets at once: the bucket's 10 get errors, the rest are counted.
	limited := b.r.Stats().ICMPv6ErrorsLimited.Load()
	nowhere := addr6("2001:db8:3::1")
	for k := 0; k < 30; k++ {
		b.r.Handle(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, nowhere, header.ProtoTCP, 64, make([]byte, 20)), nil, 0)
	}
	b.r.Flush()
	if n, l := len(vmp.take()), b.r.Stats().ICMPv6ErrorsLimited.Load()-limited; n+int(l) != 30 || n > icmp6Burst+1 {
		t.Fatalf("%d errors sent, %d limited", n, l)
	}
}

// Frames that wait for a neighbour are bounded as ARP's are: they time out after
// arp_request_timeout_sec, and a detaching interface takes its own.
func TestIPv6NeighborWaiters(t *testing.T) {
	b, vm, vmp, _, upp := ip6Bench(t)
	for k := 0; k < 5; k++ {
		if v := b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, server6, header.ProtoUDP, 64, udp6(vm6, server6, 5000, 53, nil))); v != Held {
			t.Fatal("not held")
		}
	}
	if n := len(upp.take()); n != 1 {
		t.Fatalf("%d NS for 5 frames to one neighbour, want 1", n)
	}
	if h := vm.Held(b.clock.Now()); h.Frames != 5 {
		t.Fatalf("%d frames held", h.Frames)
	}
	b.clock.advance(11 * time.Second)
	b.r.Tick()
	if len(vmp.released) != 5 || len(b.r.waiters) != 0 || b.r.Stats().ARPTimeouts.Load() != 5 {
		t.Fatalf("after the timeout: %d released, %d waiters", len(vmp.released), len(b.r.waiters))
	}
}

// The state report shows each domain's IPv6 address and gateway, the router's link-local
// address per interface and the neighbour cache.
func TestIPv6Report(t *testing.T) {
	cfg := strings.Replace(dualConfig, `<policy label_prefix`, `<report bytes="no" stats="no" quota="no"/> <policy label_prefix`, 1)
	b := newBench(t, cfg)
	vm, _ := b.attach("vm", Nic, header.MAC{})
	b.attach("up", Uplink, macUplink)
	b.r.domains["lan"].nd[vm6] = vm.MAC()
	got := string(b.r.Report().XML())
	for _, want := range []string{
		`ipv6="2001:db8:1::1/64"`, `ipv6="2001:db8:2::2/64" ipv6_gw="fe80::1"`,
		`<interface label="vm" ipv6_link_local="fe80::2:2ff:fe02:200"`,
		`<ipv6-neighbor ip="2001:db8:1::5" mac="02:02:02:02:02:01"/>`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %s:\n%s", want, got)
		}
	}
}
