package header

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	gheader "gvisor.dev/gvisor/pkg/tcpip/header"
)

var (
	pfx6   = netip.MustParseAddr("2001:db8:1::").As16()
	dns6   = netip.MustParseAddr("2001:db8::53").As16()
	dns6b  = netip.MustParseAddr("2001:db8::35").As16()
	raBase = RAFields{CurHopLimit: 64, Flags: RAManaged | RAOther, Lifetime: 1800, Reachable: 30000, Retrans: 1000}
)

// routerAdvert builds an RA with every option the router will send.
func routerAdvert(b []byte) IPv6 {
	w := StartRA(b, llB, AllNodes, raBase)
	w.LinkAddr(NDPOptSourceLinkAddr, macA6)
	w.Prefix(NDPPrefix{Len: 64, Flags: PrefixL | PrefixA, Valid: 86400, Preferred: 14400, Prefix: pfx6})
	w.MTU(1500)
	w.RDNSS(300, dns6, dns6b)
	return w.Finish()
}

// The RA builder's packet, read by gVisor: fixed fields, checksum and every option it knows.
func TestRABuilderAsGVisorReadsIt(t *testing.T) {
	ip := routerAdvert(make([]byte, 512))
	g := gheader.IPv6(ip)
	if !g.IsValid(len(ip)) || g.HopLimit() != 255 || g.NextHeader() != ProtoICMPv6 {
		t.Fatal("IPv6 header")
	}
	m := gheader.ICMPv6(g.Payload())
	if m.Type() != gheader.ICMPv6RouterAdvert || m.Checksum() != gheader.ICMPv6Checksum(gheader.ICMPv6ChecksumParams{
		Header: m, Src: tcpip.AddrFrom16(llB), Dst: tcpip.AddrFrom16(AllNodes)}) {
		t.Fatal("ICMPv6 type or checksum")
	}
	ra := gheader.NDPRouterAdvert(m.MessageBody())
	if ra.CurrHopLimit() != 64 || !ra.ManagedAddrConfFlag() || !ra.OtherConfFlag() || ra.RouterLifetime() != 1800*time.Second ||
		ra.ReachableTime() != 30*time.Second || ra.RetransTimer() != time.Second {
		t.Fatal("RA fields")
	}
	it, err := ra.Options().Iter(true)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for {
		o, done, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		switch o := o.(type) {
		case gheader.NDPSourceLinkLayerAddressOption:
			if string(o.EthernetAddress()) != string(macA6[:]) {
				t.Errorf("source link-layer address %v", o.EthernetAddress())
			}
			seen = append(seen, "sll")
		case gheader.NDPPrefixInformation:
			if o.PrefixLength() != 64 || !o.OnLinkFlag() || !o.AutonomousAddressConfigurationFlag() ||
				o.ValidLifetime() != 86400*time.Second || o.PreferredLifetime() != 14400*time.Second || o.Prefix().As16() != pfx6 {
				t.Errorf("prefix %v", o)
			}
			seen = append(seen, "prefix")
		case gheader.NDPRecursiveDNSServer:
			as, err := o.Addresses()
			if err != nil || len(as) != 2 || as[0].As16() != dns6 || as[1].As16() != dns6b || o.Lifetime() != 300*time.Second {
				t.Errorf("RDNSS %v", o)
			}
			seen = append(seen, "rdnss")
		}
	}
	if strings.Join(seen, " ") != "sll prefix rdnss" { // gVisor skips the MTU option: ours reads it below
		t.Errorf("gVisor saw %v", seen)
	}
	if err := CheckNDP(ip, ptr(WalkIPv6(ip))); err != nil {
		t.Errorf("CheckNDP: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// Options gVisor serializes, read by ours.
func TestNDPOptionsFromGVisor(t *testing.T) {
	pi := make(gheader.NDPPrefixInformation, 30)
	pi[0], pi[1] = 48, 0xc0
	copy(pi[2:], []byte{0, 0, 0x0e, 0x10, 0, 0, 0x07, 0x08}) // valid 3600, preferred 1800
	copy(pi[14:], pfx6[:])
	rdnss := make(gheader.NDPRecursiveDNSServer, 22)
	copy(rdnss[2:], []byte{0, 0, 0x01, 0x2c}) // 300 s
	copy(rdnss[6:], dns6[:])
	ser := gheader.NDPOptionsSerializer{
		gheader.NDPTargetLinkLayerAddressOption(tcpip.LinkAddress(macA6[:])),
		pi,
		rdnss,
	}
	opts := make([]byte, ser.Length())
	gheader.NDPOptions(opts).Serialize(ser)
	l := NDPOptions(opts)
	if !l.Valid() {
		t.Fatal("gVisor's options invalid")
	}
	o, ok := l.Find(NDPOptTargetLinkAddr)
	if m, ok2 := o.LinkAddr(); !ok || !ok2 || m != macA6 {
		t.Errorf("target link-layer address %v", m)
	}
	o, ok = l.Find(NDPOptPrefixInfo)
	if p, ok2 := o.Prefix(); !ok || !ok2 || p != (NDPPrefix{Len: 48, Flags: PrefixL | PrefixA, Valid: 3600, Preferred: 1800, Prefix: pfx6}) {
		t.Errorf("prefix %+v", p)
	}
	o, ok = l.Find(NDPOptRDNSS)
	if lt, n, ok2 := o.RDNSS(); !ok || !ok2 || lt != 300 || n != 1 || o.RDNSSAddr(0) != dns6 {
		t.Errorf("RDNSS lifetime %d, %d addresses", lt, n)
	}
	if _, ok := l.Find(NDPOptMTU); ok {
		t.Error("MTU option found in a list without one")
	}
}

// Both builders' messages gVisor reads alike; NA flags and targets round-trip.
func TestNSAndNABuilders(t *testing.T) {
	b := make([]byte, 128)
	w := StartNS(b, llA, SolicitedNode(v6A), v6A)
	w.LinkAddr(NDPOptSourceLinkAddr, macA6)
	ip := w.Finish()
	if err := CheckNDP(ip, ptr(WalkIPv6(ip))); err != nil {
		t.Fatalf("NS: %v", err)
	}
	ns := gheader.NDPNeighborSolicit(gheader.ICMPv6(ip.Payload()).MessageBody())
	if ns.TargetAddress().As16() != v6A {
		t.Error("NS target")
	}
	w = StartNA(b, v6A, llA, v6A, NASolicit|NAOverride)
	w.LinkAddr(NDPOptTargetLinkAddr, macA6)
	ip = w.Finish()
	if err := CheckNDP(ip, ptr(WalkIPv6(ip))); err != nil {
		t.Fatalf("NA: %v", err)
	}
	na := gheader.NDPNeighborAdvert(gheader.ICMPv6(ip.Payload()).MessageBody())
	if na.TargetAddress().As16() != v6A || na.RouterFlag() || !na.SolicitedFlag() || !na.OverrideFlag() {
		t.Error("NA as gVisor reads it")
	}
	n, _ := NewNDP(ICMPv6(ip.Payload()))
	if n.Target() != v6A || n.NAFlags() != NASolicit|NAOverride {
		t.Error("NA as ours reads it")
	}
	w = StartRS(b, [16]byte{}, AllRouters)
	ip = w.Finish()
	if err := CheckNDP(ip, ptr(WalkIPv6(ip))); err != nil || len(ip) != IPv6Len+8 {
		t.Fatalf("RS: %v, %d bytes", err, len(ip))
	}
}

func TestNDPOptionWalkRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []byte
	}{
		{"zero length", []byte{1, 0, 0, 0, 0, 0, 0, 0}},
		{"zero length after a good one", []byte{1, 1, 2, 0, 0, 0, 0, 1, 5, 0, 0, 0, 0, 0, 0, 0}},
		{"past the message", []byte{3, 4, 64, 0xc0, 0, 0, 0, 0}},
		{"one byte", []byte{1}},
	} {
		if NDPOptions(c.opts).Valid() {
			t.Errorf("%s: valid", c.name)
		}
		it, err := gheader.NDPOptions(c.opts).Iter(true)
		if err == nil {
			for {
				if _, done, e := it.Next(); done || e != nil {
					err = e
					break
				}
			}
		}
		if err == nil {
			t.Errorf("%s: gVisor takes it, the test's vector is wrong", c.name)
		}
	}
}

// Each validity check of RFC 4861 the codec makes, failed once.
func TestCheckNDPRefuses(t *testing.T) {
	mod := func(f func(ip IPv6), fixChecksum bool) IPv6 {
		ip := routerAdvert(make([]byte, 512))
		f(ip)
		if fixChecksum {
			ICMPv6(ip.Payload()).UpdateChecksum(ip.Src(), ip.Dst())
		}
		return ip
	}
	na := func(src, dst, target [16]byte, flags uint8) IPv6 {
		w := StartNA(make([]byte, 128), src, dst, target, flags)
		return w.Finish()
	}
	ns := func(src, dst [16]byte, sll bool) IPv6 {
		w := StartNS(make([]byte, 128), src, dst, v6A)
		if sll {
			w.LinkAddr(NDPOptSourceLinkAddr, macA6)
		}
		return w.Finish()
	}
	for _, c := range []struct {
		name string
		ip   IPv6
		want error
	}{
		{"hop limit 64", mod(func(ip IPv6) { ip.SetHopLimit(64) }, false), errNDPHopLimit},
		{"code 1", mod(func(ip IPv6) { ip[IPv6Len+1] = 1 }, true), errNDPCode},
		{"checksum", mod(func(ip IPv6) { ip[IPv6Len+4]++ }, false), errNDPChecksum},
		{"zero-length option", mod(func(ip IPv6) { ip[IPv6Len+raLen+1] = 0 }, true), errNDPOptions},
		{"RA from a global address", mod(func(ip IPv6) { ip.SetSrc(v6A) }, true), errNDPSource},
		{"RA cut in its fixed part", func() IPv6 {
			ip := routerAdvert(make([]byte, 512))
			ip = ip[:IPv6Len+12]
			ip.SetPayloadLen(12)
			ICMPv6(ip.Payload()).UpdateChecksum(ip.Src(), ip.Dst())
			return ip
		}(), errNDPType},
		{"NA for a multicast target", na(v6A, llA, AllNodes, 0), errNDPTarget},
		{"solicited NA to all nodes", na(v6A, AllNodes, v6A, NASolicit), errNDPSolicit},
		{"DAD NS with a source link-layer address", ns([16]byte{}, SolicitedNode(v6A), true), errNDPDAD},
		{"DAD NS to a unicast address", ns([16]byte{}, v6A, false), errNDPDAD},
		{"fragmented", func() IPv6 {
			ra := routerAdvert(make([]byte, 512))
			return IPv6(ipv6(ProtoFragment, 255, ra.Src(), ra.Dst(), cat(frag(ProtoICMPv6, 0, false, 1), ra.Payload())))
		}(), errNDPChain},
	} {
		if got := CheckNDP(c.ip, ptr(WalkIPv6(c.ip))); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestCheckNDPRedirect(t *testing.T) {
	redirect := func(src, target, dst [16]byte) IPv6 {
		m := make([]byte, redirectLen)
		m[0] = NDPRedirect
		copy(m[8:], target[:])
		copy(m[24:], dst[:])
		ICMPv6(m).UpdateChecksum(src, llA)
		return IPv6(ipv6(ProtoICMPv6, 255, src, llA, m))
	}
	for _, c := range []struct {
		name string
		ip   IPv6
		want error
	}{
		{"to a better first hop", redirect(llB, llA, v6A), nil},
		{"to the destination itself", redirect(llB, v6A, v6A), nil},
		{"from a global address", redirect(v6A, llA, v6B), errNDPSource},
		{"for a multicast destination", redirect(llB, llA, AllNodes), errNDPTarget},
		{"to a global first hop", redirect(llB, v6B, v6A), errNDPTarget},
	} {
		if got := CheckNDP(c.ip, ptr(WalkIPv6(c.ip))); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestWalkAndCheckAllocateNothing(t *testing.T) {
	ra := routerAdvert(make([]byte, 512))
	chained := IPv6(ipv6(ProtoHopByHop, 64, v6A, v6B, cat(ext(ProtoFragment, 0), frag(ProtoTCP, 0, true, 9), tcp(1, 2, 3, 4, 0x02))))
	if n := testing.AllocsPerRun(100, func() {
		c := WalkIPv6(ra)
		_ = CheckNDP(ra, &c)
		_ = WalkIPv6(chained)
	}); n != 0 {
		t.Errorf("%v allocations per packet", n)
	}
}
