package fqcodel

import (
	"encoding/binary"

	"github.com/nicstack/nicstack/netdev/header"
)

// Key is what tells flows apart: addresses (an IPv4 one in the first four bytes), ports of
// TCP and UDP (zero for other protocols and for fragments, whose later parts carry none) and
// the IP protocol. A frame that is not IP has the zero Key: one flow per class.
type Key struct {
	Src, Dst     [16]byte
	SPort, DPort uint16
	Proto        uint8
}

// ECN codepoints, the two low bits of IPv4's TOS and IPv6's traffic class (RFC 3168).
const (
	ecnMask = 3
	ecnCE   = 3
)

// Classify reads frame's flow key and whether it is ECN-capable (ECT(0), ECT(1), or CE
// already, which Linux counts as markable too). It reads only within frame.
func Classify(frame []byte) (k Key, ect bool) {
	eth, ok := header.NewEth(frame)
	if !ok {
		return k, false
	}
	switch eth.Type() {
	case header.EtherTypeIPv4:
		ip, ok := header.NewIPv4(eth.Payload())
		if !ok {
			return k, false
		}
		copy(k.Src[:4], ip[12:16])
		copy(k.Dst[:4], ip[16:20])
		k.Proto = ip.Protocol()
		if !ip.Fragmented() {
			k.SPort, k.DPort = ports(k.Proto, ip.Payload())
		}
		return k, ip[1]&ecnMask != 0
	case header.EtherTypeIPv6:
		ip, ok := header.NewIPv6(eth.Payload())
		if !ok {
			return k, false
		}
		copy(k.Src[:], ip[8:24])
		copy(k.Dst[:], ip[24:40])
		c := header.WalkIPv6(ip)
		k.Proto = c.Proto
		if c.Drop == header.ChainOK && !c.Frag.Is {
			k.SPort, k.DPort = ports(k.Proto, ip[c.Offset:])
		}
		return k, ip.TrafficClass()&ecnMask != 0
	}
	return k, false
}

// ports are a TCP or UDP header's, when l4 holds them.
func ports(proto uint8, l4 []byte) (src, dst uint16) {
	if (proto != header.ProtoTCP && proto != header.ProtoUDP) || len(l4) < 4 {
		return 0, 0
	}
	return binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
}

// MarkCE sets CE in frame's IP header in place when it is ECN-capable, and reports whether
// it now carries CE; IPv4's header checksum is updated incrementally (RFC 1624).
func MarkCE(frame []byte) bool {
	eth, ok := header.NewEth(frame)
	if !ok {
		return false
	}
	switch eth.Type() {
	case header.EtherTypeIPv4:
		ip, ok := header.NewIPv4(eth.Payload())
		if !ok || ip[1]&ecnMask == 0 {
			return false
		}
		if ip[1]&ecnMask != ecnCE {
			old := binary.BigEndian.Uint16(ip[0:])
			ip[1] |= ecnCE
			ip.SetChecksum(header.Adjust(ip.Checksum(), old, binary.BigEndian.Uint16(ip[0:])))
		}
		return true
	case header.EtherTypeIPv6:
		ip, ok := header.NewIPv6(eth.Payload())
		if !ok || ip.TrafficClass()&ecnMask == 0 {
			return false
		}
		// The traffic class straddles bytes 0 and 1; its ECN bits are bits 4 and 5 of byte 1.
		ip[1] |= ecnCE << 4
		return true
	}
	return false
}

// bucket is the flow bucket of k in a class: a hash keyed with the scheduler's seed, scaled
// to Flows without a division.
func (s *Scheduler) bucket(k *Key) int {
	h := s.seed
	h = mix(h ^ binary.LittleEndian.Uint64(k.Src[0:]))
	h = mix(h ^ binary.LittleEndian.Uint64(k.Src[8:]))
	h = mix(h ^ binary.LittleEndian.Uint64(k.Dst[0:]))
	h = mix(h ^ binary.LittleEndian.Uint64(k.Dst[8:]))
	h = mix(h ^ uint64(k.SPort)<<24 ^ uint64(k.DPort)<<8 ^ uint64(k.Proto))
	return int((h >> 32) * uint64(s.cfg.Flows) >> 32)
}

// mix is MurmurHash3's 64-bit finaliser: a bijection whose every input bit flips about half
// the output bits.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
