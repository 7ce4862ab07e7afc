package header

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	gheader "gvisor.dev/gvisor/pkg/tcpip/header"
	"pgregory.net/rapid"
)

// IPv6 packets built by hand, byte by byte, and checked against gVisor's header package, an
// implementation that shares none of this codec's code.

var (
	v6A   = netip.MustParseAddr("2001:db8::1").As16()
	v6B   = netip.MustParseAddr("2001:db8:0:1::2").As16()
	llA   = netip.MustParseAddr("fe80::ff:fe00:1").As16() // LinkLocal(02:00:00:00:00:01)
	llB   = netip.MustParseAddr("fe80::2").As16()
	macA6 = MAC{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
)

// ipv6 is a fixed header (traffic class 0xa5, flow label 0x12345) and payload.
func ipv6(next, hlim byte, src, dst [16]byte, payload []byte) []byte {
	h := []byte{0x6a, 0x51, 0x23, 0x45, 0, 0, next, hlim}
	binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
	h = append(append(h, src[:]...), dst[:]...)
	return append(h, payload...)
}

// ext is an extension header of 8*units bytes (AH: 4*(units+2)) naming next.
func ext(next byte, units int) []byte {
	b := make([]byte, (units+1)*8)
	b[0], b[1] = next, byte(units)
	return b
}

func frag(next byte, off uint16, more bool, id uint32) []byte {
	b := []byte{next, 0, 0, 0, 0, 0, 0, 0}
	v := off
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(b[2:], v)
	binary.BigEndian.PutUint32(b[4:], id)
	return b
}

func cat(bs ...[]byte) (out []byte) {
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

func TestIPv6ViewReadsTheFields(t *testing.T) {
	pkt := ipv6(ProtoUDP, 63, v6A, v6B, make([]byte, 12))
	ip, ok := NewIPv6(append(pkt, 0, 0, 0)) // Ethernet padding
	if !ok || len(ip) != len(pkt) {
		t.Fatalf("NewIPv6: %v, %d bytes", ok, len(ip))
	}
	g := gheader.IPv6(pkt)
	tc, fl := g.TOS()
	if ip.TrafficClass() != tc || ip.FlowLabel() != fl || ip.PayloadLen() != int(g.PayloadLength()) ||
		ip.NextHeader() != g.NextHeader() || ip.HopLimit() != g.HopLimit() ||
		ip.Src() != g.SourceAddress().As16() || ip.Dst() != g.DestinationAddress().As16() {
		t.Fatalf("fields differ from gVisor's: tc %d/%d flow %#x/%#x", ip.TrafficClass(), tc, ip.FlowLabel(), fl)
	}
	ip.SetHopLimit(62)
	ip.SetSrc(v6B)
	ip.SetDst(v6A)
	if g.HopLimit() != 62 || g.SourceAddress().As16() != v6B || g.DestinationAddress().As16() != v6A {
		t.Fatal("setters")
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"short", pkt[:39]},
		{"version 4", append([]byte{0x45}, pkt[1:]...)},
		{"payload past the buffer", pkt[:len(pkt)-1]},
	} {
		if _, ok := NewIPv6(c.b); ok {
			t.Errorf("%s accepted", c.name)
		}
	}
	tso := ipv6(ProtoTCP, 64, v6A, v6B, make([]byte, 100))
	binary.BigEndian.PutUint16(tso[4:], 0)
	if ip, ok := NewIPv6(tso); !ok || len(ip) != len(tso) {
		t.Error("payload length 0 not taken as the whole buffer")
	}
}

func TestPutIPv6MatchesGVisor(t *testing.T) {
	got := make([]byte, IPv6Len)
	PutIPv6(got, 1234, ProtoICMPv6, 255, v6A, v6B)
	want := make([]byte, IPv6Len)
	gheader.IPv6(want).Encode(&gheader.IPv6Fields{PayloadLength: 1234, TransportProtocol: ProtoICMPv6, HopLimit: 255,
		SrcAddr: tcpip.AddrFrom16(v6A), DstAddr: tcpip.AddrFrom16(v6B)})
	if string(got) != string(want) {
		t.Fatalf("PutIPv6\n got % x\nwant % x", got, want)
	}
}

// The pseudo-header sum, and the ICMPv6 checksum over it, are gVisor's for any addresses and
// lengths.
func TestPseudoSum6AndICMPv6ChecksumMatchGVisor(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		src := [16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "src"))
		dst := [16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "dst"))
		n := rapid.IntRange(0, 0xffff).Draw(t, "len")
		proto := rapid.SampledFrom([]uint8{ProtoTCP, ProtoUDP, ProtoICMPv6}).Draw(t, "proto")
		got := Fold(PseudoSum6(src, dst, proto, n))
		want := gheader.PseudoHeaderChecksum(tcpip.TransportProtocolNumber(proto), tcpip.AddrFrom16(src), tcpip.AddrFrom16(dst), uint16(n))
		if got != want {
			t.Fatalf("pseudo-header sum %#04x, gVisor %#04x", got, want)
		}
		m := ICMPv6(rapid.SliceOfN(rapid.Byte(), ICMPv6Len, 300).Draw(t, "message"))
		m.UpdateChecksum(src, dst)
		g := gheader.ICMPv6Checksum(gheader.ICMPv6ChecksumParams{Header: gheader.ICMPv6(m), Src: tcpip.AddrFrom16(src), Dst: tcpip.AddrFrom16(dst)})
		if m.Checksum() != g || !m.ChecksumValid(src, dst) {
			t.Fatalf("ICMPv6 checksum %#04x, gVisor %#04x", m.Checksum(), g)
		}
	})
}

// Rewriting an address of the pseudo-header with Adjust16 gives the checksum computed again
// (NAT66).
func TestAdjust16MatchesRecompute(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		src := [16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "src"))
		dst := [16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "dst"))
		src2 := [16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "new src"))
		m := ICMPv6(rapid.SliceOfN(rapid.Byte(), ICMPv6Len, 200).Draw(t, "message"))
		m.UpdateChecksum(src, dst)
		got, want := Adjust16(m.Checksum(), src, src2), m.ComputeChecksum(src2, dst)
		if got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
			t.Fatalf("adjusted %#04x, recomputed %#04x", got, want)
		}
	})
}

func TestAddressesMatchGVisor(t *testing.T) {
	for _, m := range []MAC{macA6, {0x00, 0x1b, 0x21, 0x3c, 0x4d, 0x5e}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		lm := tcpip.LinkAddress(m[:])
		if got, want := LinkLocal(m), gheader.LinkLocalAddr(lm).As16(); got != want {
			t.Errorf("LinkLocal(%v) = %v, gVisor %v", m, netip.AddrFrom16(got), netip.AddrFrom16(want))
		}
		if got, want := EUI64(m), gheader.EthernetAddressToModifiedEUI64(lm); got != want {
			t.Errorf("EUI64(%v) = % x, gVisor % x", m, got, want)
		}
		pfx := netip.MustParseAddr("2001:db8:1:2::").As16()
		want, ll := pfx, gheader.LinkLocalAddr(lm).As16()
		copy(want[8:], ll[8:])
		if got := SLAACAddr(pfx, m); got != want {
			t.Errorf("SLAACAddr = %v, want %v", netip.AddrFrom16(got), netip.AddrFrom16(want))
		}
	}
	if LinkLocal(macA6) != llA {
		t.Errorf("LinkLocal(%v) = %v", macA6, netip.AddrFrom16(LinkLocal(macA6)))
	}
	for _, a := range [][16]byte{v6A, v6B, llA, netip.MustParseAddr("2001:db8::12:3456:789a").As16()} {
		sn := SolicitedNode(a)
		if want := gheader.SolicitedNodeAddr(tcpip.AddrFrom16(a)).As16(); sn != want {
			t.Errorf("SolicitedNode(%v) = %v, gVisor %v", netip.AddrFrom16(a), netip.AddrFrom16(sn), netip.AddrFrom16(want))
		}
		if got, want := MulticastMAC(sn), gheader.EthernetAddressFromMulticastIPv6Address(tcpip.AddrFrom16(sn)); string(got[:]) != string(want) {
			t.Errorf("MulticastMAC(%v) = %v, gVisor %v", netip.AddrFrom16(sn), got, want)
		}
	}
	if !IsMulticast6(AllNodes) || !IsMulticast6(AllRouters) || IsMulticast6(v6A) || !IsLinkLocal6(llB) || IsLinkLocal6(v6A) {
		t.Error("address kinds")
	}
}
