package header

import (
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	gheader "gvisor.dev/gvisor/pkg/tcpip/header"
)

func TestChainWalkReachesTheUpperLayer(t *testing.T) {
	udp8 := udp(1, 2, nil)
	for _, c := range []struct {
		name    string
		pkt     []byte
		proto   uint8
		offset  int
		headers int
		frag    IPv6Frag
	}{
		{"no extension", ipv6(ProtoUDP, 64, v6A, v6B, udp8), ProtoUDP, 40, 0, IPv6Frag{}},
		{"RFC 8200 order", ipv6(ProtoHopByHop, 64, v6A, v6B, cat(ext(ProtoDstOpts, 0), ext(ProtoRouting, 1),
			routing(ProtoFragment, 2, 1), frag(ProtoAH, 0, true, 7), ah(ProtoDstOpts, 1), ext(ProtoICMPv6, 0), make([]byte, 8))),
			ProtoICMPv6, 40 + 8 + 16 + 8 + 8 + 12 + 8, 6, IPv6Frag{Is: true, More: true, ID: 7}},
		{"later fragment", ipv6(ProtoFragment, 64, v6A, v6B, cat(frag(ProtoTCP, 1448, false, 0xdeadbeef), make([]byte, 16))),
			ProtoTCP, 48, 1, IPv6Frag{Is: true, Offset: 1448, ID: 0xdeadbeef}},
		{"ESP ends it", ipv6(ProtoDstOpts, 64, v6A, v6B, cat(ext(ProtoESP, 0), make([]byte, 16))), ProtoESP, 48, 1, IPv6Frag{}},
		{"no next header", ipv6(ProtoNoNext, 64, v6A, v6B, nil), ProtoNoNext, 40, 0, IPv6Frag{}},
	} {
		ip, ok := NewIPv6(c.pkt)
		if !ok {
			t.Fatalf("%s: NewIPv6", c.name)
		}
		w, n := NewIPv6Chain(ip), 0
		for {
			if _, ok := w.Next(); !ok {
				break
			}
			n++
		}
		if v := WalkIPv6(ip); v.Proto != w.Proto || v.Offset != w.Offset || v.Frag != w.Frag || v.Drop != w.Drop {
			t.Errorf("%s: WalkIPv6 differs from stepping", c.name)
		}
		if w.Drop != ChainOK || w.Proto != c.proto || w.Offset != c.offset || n != c.headers || w.Frag != c.frag {
			t.Errorf("%s: drop %v proto %d offset %d headers %d frag %+v, want proto %d offset %d headers %d frag %+v",
				c.name, w.Drop, w.Proto, w.Offset, n, w.Frag, c.proto, c.offset, c.headers, c.frag)
		}
	}
}

func routing(next byte, typ, left byte) []byte {
	b := ext(next, 0)
	b[2], b[3] = typ, left
	return b
}

// ah is an authentication header of 4*(units+2) bytes.
func ah(next byte, units int) []byte {
	b := make([]byte, (units+2)*4)
	b[0], b[1] = next, byte(units)
	return b
}

// Each chain the walker refuses, with its reason and the pointer of a parameter problem.
func TestChainWalkRejects(t *testing.T) {
	for _, c := range []struct {
		name    string
		pkt     []byte
		drop    ChainDrop
		pointer int
	}{
		{"hop-by-hop second", ipv6(ProtoDstOpts, 64, v6A, v6B, cat(ext(ProtoHopByHop, 0), ext(ProtoUDP, 0), udp(1, 2, nil))),
			ChainHopByHopNotFirst, 40},
		{"routing twice", ipv6(ProtoRouting, 64, v6A, v6B, cat(routing(ProtoRouting, 2, 0), routing(ProtoUDP, 2, 0), udp(1, 2, nil))),
			ChainRepeated, 40},
		{"fragment twice", ipv6(ProtoFragment, 64, v6A, v6B, cat(frag(ProtoFragment, 0, true, 1), frag(ProtoUDP, 0, true, 1))),
			ChainRepeated, 40},
		{"destination options thrice", ipv6(ProtoDstOpts, 64, v6A, v6B, cat(ext(ProtoDstOpts, 0), ext(ProtoDstOpts, 0), ext(ProtoUDP, 0))),
			ChainRepeated, 48},
		{"unknown next header", ipv6(ProtoHopByHop, 64, v6A, v6B, cat(ext(253, 0), make([]byte, 8))), ChainUnknownNextHeader, 40},
		{"unknown first next header", ipv6(47, 64, v6A, v6B, make([]byte, 8)), ChainUnknownNextHeader, 6},
		{"routing type 0", ipv6(ProtoRouting, 64, v6A, v6B, cat(routing(ProtoUDP, 0, 1), make([]byte, 16), udp(1, 2, nil))),
			ChainRoutingType0, 42},
		{"header past the packet", ipv6(ProtoHopByHop, 64, v6A, v6B, ext(ProtoUDP, 1)[:8]), ChainTruncated, 41},
		{"no room for next header and length", ipv6(ProtoHopByHop, 64, v6A, v6B, []byte{ProtoUDP}), ChainTruncated, 6},
		{"fragment header cut", ipv6(ProtoFragment, 64, v6A, v6B, frag(ProtoUDP, 0, false, 1)[:6]), ChainTruncated, 41},
		{"past the first 1280 bytes", ipv6(ProtoHopByHop, 64, v6A, v6B, cat(ext(ProtoDstOpts, 100), ext(ProtoUDP, 100))),
			ChainTooLong, 40 + 808 + 1},
	} {
		ip, ok := NewIPv6(c.pkt)
		if !ok {
			t.Fatalf("%s: NewIPv6", c.name)
		}
		w := WalkIPv6(ip)
		if w.Drop != c.drop || w.Pointer != c.pointer {
			t.Errorf("%s: drop %q pointer %d, want %q pointer %d", c.name, w.Drop, w.Pointer, c.drop, c.pointer)
		}
	}
}

func TestICMPv6ErrorQuotesWithin1280Bytes(t *testing.T) {
	for _, n := range []int{0, 100, IPv6MinMTU - IPv6Len - ICMPv6Len, 1500, 9000} {
		offending := ipv6(ProtoUDP, 1, v6B, v6A, make([]byte, max(0, n-IPv6Len)))[:n]
		b := make([]byte, 2000)
		got := PutICMPv6Error(b, ICMPv6TimeExceeded, ICMPv6HopLimitExceeded, 0, v6A, v6B, offending)
		want := min(IPv6MinMTU, IPv6Len+ICMPv6Len+n)
		if got != want {
			t.Errorf("%d-byte packet: error of %d bytes, want %d", n, got, want)
		}
		ip, ok := NewIPv6(b[:got])
		if !ok || ip.NextHeader() != ProtoICMPv6 || len(ip) != got {
			t.Fatalf("%d-byte packet: error's IPv6 header", n)
		}
		m := ICMPv6(ip.Payload())
		if m.Type() != ICMPv6TimeExceeded || !m.ChecksumValid(v6A, v6B) || string(m.Body()) != string(offending[:len(m.Body())]) {
			t.Errorf("%d-byte packet: error message", n)
		}
	}
	// Quoting from the buffer the error is written into moves the packet first.
	b := make([]byte, 1500)
	off := b[14:]
	copy(off, ipv6(ProtoUDP, 64, v6B, v6A, udp(5, 6, []byte("quoted"))))
	want := string(append([]byte(nil), off[:IPv6Len+UDPLen+6]...))
	n := PutICMPv6Error(b, ICMPv6ParamProblem, ICMPv6UnknownNextHeader, 6, v6A, v6B, off[:IPv6Len+UDPLen+6])
	if m := ICMPv6(b[IPv6Len:n]); m.Pointer() != 6 || string(m.Body()) != want || !m.ChecksumValid(v6A, v6B) {
		t.Error("error quoting from its own buffer")
	}
	// gVisor reads a packet too big's MTU where it was written.
	n = PutICMPv6Error(b, ICMPv6PacketTooBig, 0, 1400, v6A, v6B, off[:60])
	if g := gheader.ICMPv6(b[IPv6Len:n]); g.MTU() != 1400 || g.Type() != gheader.ICMPv6PacketTooBig {
		t.Error("packet too big as gVisor reads it")
	}
}

func TestICMPv6Echo(t *testing.T) {
	m := append(make([]byte, ICMPv6Len), "ping"...)
	PutICMPv6Echo(m, ICMPv6EchoRequest, 1, 2, v6A, v6B)
	g := gheader.ICMPv6(m)
	if g.Type() != gheader.ICMPv6EchoRequest || g.Ident() != 1 || g.Sequence() != 2 ||
		g.Checksum() != gheader.ICMPv6Checksum(gheader.ICMPv6ChecksumParams{Header: g, Src: tcpip.AddrFrom16(v6A), Dst: tcpip.AddrFrom16(v6B)}) {
		t.Fatal("echo request as gVisor reads it")
	}
	ICMPv6(m).SetID(0xbeef)
	if ICMPv6(m).ID() != 0xbeef || !ICMPv6(m).ChecksumValid(v6A, v6B) {
		t.Fatal("SetID")
	}
}
