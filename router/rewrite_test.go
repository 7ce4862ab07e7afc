package router

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// TestQuickRewriteMatchesFieldByField checks the summed-up rewrite of a link side's plan
// against the one that adjusts the checksums field by field: the same packet, valid
// checksums, for UDP (with and without checksum), TCP and ICMP echo and random tuples.
func TestQuickRewriteMatchesFieldByField(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	addr := func() [4]byte {
		var a [4]byte
		for k := range a {
			a[k] = byte(rng.IntN(256))
			if rng.IntN(4) == 0 {
				a[k] = []byte{0, 0xff}[rng.IntN(2)] // the one's complement corners
			}
		}
		return a
	}
	port := func() uint16 { return []uint16{0, 0xffff, uint16(rng.Uint32())}[rng.IntN(3)] }
	var mac header.MAC
	for n := range 20000 {
		from := flowKey{src: addr(), dst: addr(), sport: port(), dport: port()}
		to := flowKey{src: addr(), dst: addr(), sport: port(), dport: port()}
		payload := make([]byte, rng.IntN(40))
		for k := range payload {
			payload[k] = byte(rng.IntN(256))
		}
		var f []byte
		switch n % 4 {
		case 0, 1:
			from.proto = header.ProtoUDP
			f = udpFrameT(mac, mac, from.src, from.dst, from.sport, from.dport, payload)
			if n%4 == 1 {
				f[header.EthLen+20+6], f[header.EthLen+20+7] = 0, 0 // no checksum
			}
		case 2:
			from.proto = header.ProtoTCP
			f = tcpFrame(mac, mac, from.src, from.dst, from.sport, from.dport, 0x10, rng.Uint32(), rng.Uint32(), payload)
		case 3:
			from.proto = header.ProtoICMP
			from.dport = from.sport
			f = icmpEcho(mac, mac, from.src, from.dst, header.ICMPEchoRequest, from.sport, uint16(n))
		}
		to.proto = from.proto
		rw := newRewrite(from, to)
		quick := bytes.Clone(f[header.EthLen:])
		slow := bytes.Clone(quick)
		if !quickRewrite(header.IPv4(quick), 20, &rw) {
			t.Fatalf("packet %d: the quick rewrite refused a packet carrying its tuple", n)
		}
		applySlow(slow, &rw)
		if !sameUpToZero(quick, slow) {
			t.Fatalf("packet %d (protocol %d):\nquick % x\nslow  % x", n, from.proto, quick, slow)
		}
		ip := header.IPv4(quick)
		if header.Checksum(ip.Header(), 0) != 0 {
			t.Fatalf("packet %d: bad IPv4 header checksum", n)
		}
		seg := ip.Payload()
		switch {
		case from.proto == header.ProtoICMP:
			if header.Checksum(seg, 0) != 0 {
				t.Fatalf("packet %d: bad ICMP checksum", n)
			}
		case from.proto == header.ProtoUDP && seg[6] == 0 && seg[7] == 0:
			if n%4 != 1 {
				t.Fatalf("packet %d: a UDP checksum became 0 (none)", n)
			}
		default:
			if header.Checksum(seg, header.PseudoSum(ip.Src(), ip.Dst(), ip.Protocol(), len(seg))) != 0 {
				t.Fatalf("packet %d: bad protocol %d checksum", n, from.proto)
			}
		}
	}
	// A packet that does not carry the plan's tuple is left to the field-by-field way.
	from := flowKey{src: ip4("10.0.0.1"), dst: ip4("10.0.0.2"), sport: 1, dport: 2, proto: header.ProtoUDP}
	rw := newRewrite(from, flowKey{src: ip4("10.0.1.1"), dst: ip4("10.0.1.2"), sport: 3, dport: 4, proto: header.ProtoUDP})
	f := udpFrameT(mac, mac, from.src, from.dst, from.sport, 9, nil)
	if quickRewrite(header.IPv4(f[header.EthLen:]), 20, &rw) {
		t.Fatal("quick rewrite of a packet with another tuple")
	}
}

// applySlow is the field-by-field rewrite.
func applySlow(pkt []byte, rw *rewrite) {
	slow := *rw
	slow.from = flowKey{} // no packet carries it: quickRewrite refuses
	rewriteFields(header.IPv4(pkt), &netdev.Offload{}, &slow)
}

// sameUpToZero compares two packets whose checksum fields may hold either form of one's
// complement zero (0x0000 and 0xffff are the same sum).
func sameUpToZero(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if a[k] != b[k] {
			// Accept only a 16-bit field of 0000 against ffff.
			k2 := k &^ 1
			x, y := a[k2:k2+2], b[k2:k2+2]
			if !(bytes.Equal(x, []byte{0, 0}) && bytes.Equal(y, []byte{0xff, 0xff}) ||
				bytes.Equal(y, []byte{0, 0}) && bytes.Equal(x, []byte{0xff, 0xff})) {
				return false
			}
		}
	}
	return true
}
