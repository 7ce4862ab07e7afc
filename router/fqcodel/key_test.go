package fqcodel

import (
	"encoding/binary"
	"testing"

	"github.com/nicstack/nicstack/netdev/header"
)

var (
	a4, b4 = [4]byte{198, 18, 0, 1}, [4]byte{198, 18, 0, 2}
	a6     = [16]byte{0xfd, 0, 15: 1}
	b6     = [16]byte{0xfd, 0, 15: 2}
)

// frame4 is an Ethernet frame of an IPv4 packet with ports 1000 -> 2000 in its first four
// payload bytes and tos as given.
func frame4(proto uint8, tos byte, frag uint16) []byte {
	b := make([]byte, header.EthLen+header.IPv4Len+20)
	header.Eth(b).SetType(header.EtherTypeIPv4)
	ip := b[header.EthLen:]
	header.PutIPv4(ip, len(ip), proto, a4, b4)
	ip[1] = tos
	binary.BigEndian.PutUint16(ip[6:], frag)
	header.IPv4(ip).SetChecksum(header.IPv4(ip).ComputeChecksum())
	binary.BigEndian.PutUint16(ip[20:], 1000)
	binary.BigEndian.PutUint16(ip[22:], 2000)
	return b
}

// frame6 is the same over IPv6 with traffic class tc, after the extension headers ext (next
// header values, each an 8-byte header).
func frame6(proto uint8, tc byte, ext ...uint8) []byte {
	b := make([]byte, header.EthLen+header.IPv6Len+8*len(ext)+20)
	header.Eth(b).SetType(header.EtherTypeIPv6)
	ip := b[header.EthLen:]
	next := proto
	if len(ext) > 0 {
		next = ext[0]
	}
	header.PutIPv6(ip, len(ip)-header.IPv6Len, next, 64, a6, b6)
	binary.BigEndian.PutUint32(ip, 6<<28|uint32(tc)<<20|0x12345)
	off := header.IPv6Len
	for i := range ext {
		n := proto
		if i+1 < len(ext) {
			n = ext[i+1]
		}
		ip[off] = n // fragment header: offset 0, more fragments
		if ext[i] == header.ProtoFragment {
			ip[off+3] = 1
		}
		off += 8
	}
	binary.BigEndian.PutUint16(ip[off:], 1000)
	binary.BigEndian.PutUint16(ip[off+2:], 2000)
	return b
}

func TestClassify(t *testing.T) {
	k4 := func(proto uint8, ports bool) (k Key) {
		copy(k.Src[:], a4[:])
		copy(k.Dst[:], b4[:])
		k.Proto = proto
		if ports {
			k.SPort, k.DPort = 1000, 2000
		}
		return
	}
	k6 := func(proto uint8, ports bool) Key {
		k := Key{Src: a6, Dst: b6, Proto: proto}
		if ports {
			k.SPort, k.DPort = 1000, 2000
		}
		return k
	}
	arp := make([]byte, 42)
	header.Eth(arp).SetType(header.EtherTypeARP)
	for _, c := range []struct {
		name  string
		frame []byte
		key   Key
		ect   bool
	}{
		{"tcp", frame4(header.ProtoTCP, 0, 0), k4(header.ProtoTCP, true), false},
		{"udp ect0", frame4(header.ProtoUDP, 2, 0), k4(header.ProtoUDP, true), true},
		{"udp ect1", frame4(header.ProtoUDP, 0xb9, 0), k4(header.ProtoUDP, true), true},
		{"icmp", frame4(header.ProtoICMP, 3, 0), k4(header.ProtoICMP, false), true},
		{"first fragment", frame4(header.ProtoUDP, 0, 0x2000), k4(header.ProtoUDP, false), false},
		{"later fragment", frame4(header.ProtoUDP, 0, 10), k4(header.ProtoUDP, false), false},
		{"tcp6", frame6(header.ProtoTCP, 0), k6(header.ProtoTCP, true), false},
		{"udp6 ect0 after options", frame6(header.ProtoUDP, 2, header.ProtoDstOpts), k6(header.ProtoUDP, true), true},
		{"udp6 fragment", frame6(header.ProtoUDP, 1, header.ProtoFragment), k6(header.ProtoUDP, false), true},
		{"icmpv6", frame6(header.ProtoICMPv6, 0), k6(header.ProtoICMPv6, false), false},
		{"arp", arp, Key{}, false},
		{"short", arp[:10], Key{}, false},
		{"bad ipv4", frame4(header.ProtoTCP, 0, 0)[:header.EthLen+10], Key{}, false},
	} {
		k, ect := Classify(c.frame)
		if k != c.key || ect != c.ect {
			t.Errorf("%s: %+v ect %v, want %+v ect %v", c.name, k, ect, c.key, c.ect)
		}
	}
}

func TestMarkCE(t *testing.T) {
	for _, c := range []struct {
		tos    byte
		marked bool
	}{{0, false}, {1, true}, {2, true}, {3, true}, {0xb8, false}, {0xba, true}} {
		f := frame4(header.ProtoUDP, c.tos, 0)
		want := append([]byte(nil), f...)
		if c.marked {
			want[header.EthLen+1] |= 3
		}
		if got := MarkCE(f); got != c.marked {
			t.Errorf("tos %#x: marked %v", c.tos, got)
		}
		ip := header.IPv4(f[header.EthLen:])
		if ip[1] != want[header.EthLen+1] || ip.Checksum() != ip.ComputeChecksum() {
			t.Errorf("tos %#x: tos %#x checksum %#x, want %#x and %#x", c.tos, ip[1], ip.Checksum(), want[header.EthLen+1], ip.ComputeChecksum())
		}
	}
	for _, c := range []struct {
		tc     byte
		marked bool
	}{{0, false}, {1, true}, {2, true}, {3, true}, {0xb8, false}, {0xb9, true}} {
		f := frame6(header.ProtoTCP, c.tc)
		if got := MarkCE(f); got != c.marked {
			t.Errorf("traffic class %#x: marked %v", c.tc, got)
		}
		ip := header.IPv6(f[header.EthLen:])
		want := c.tc
		if c.marked {
			want |= 3
		}
		if ip.TrafficClass() != want || ip.FlowLabel() != 0x12345 || ip[0]>>4 != 6 {
			t.Errorf("traffic class %#x: now %#x, flow label %#x", c.tc, ip.TrafficClass(), ip.FlowLabel())
		}
	}
	if MarkCE(make([]byte, 42)) {
		t.Error("marked a frame that is no IP")
	}
}

// The hash spreads flows over the buckets, and the seed perturbs it.
func TestBucket(t *testing.T) {
	s1, _ := New(Config{Seed: 1})
	s2, _ := New(Config{Seed: 2})
	var k Key
	hits := make([]int, s1.cfg.Flows)
	same := 0
	for p := range 10240 {
		k.SPort = uint16(p)
		b := s1.bucket(&k)
		hits[b]++
		if b == s2.bucket(&k) {
			same++
		}
	}
	for b, n := range hits {
		if n < 1 || n > 30 { // 10 expected; a Poisson(10) beyond 30 has p ~ 1e-7
			t.Errorf("bucket %d: %d of 10240 ports", b, n)
		}
	}
	if same > 40 { // 10 expected
		t.Errorf("%d of 10240 keys in the same bucket under two seeds", same)
	}
}
