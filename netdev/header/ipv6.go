package header

import "encoding/binary"

// IPv6Len is the length of the fixed IPv6 header (RFC 8200 §3).
const IPv6Len = 40

// IPv6MinMTU is the link MTU every IPv6 link carries (RFC 8200 §5): the bound of an ICMPv6
// error packet and of the extension header chain the walker reads.
const IPv6MinMTU = 1280

// IPv6 is an IPv6 packet view: the fixed header and its payload (extension headers included).
// IPv6 has no header checksum; the upper layers' checksums cover its addresses (PseudoSum6).
type IPv6 []byte

// NewIPv6 returns the view of the IPv6 packet at the start of b, trimmed to its payload
// length, or false when b holds no IPv6 header or less payload than it says. As NewIPv4 takes
// a total length of 0, a payload length of 0 is taken for a TSO super-frame (or a jumbogram)
// whose length the stack left to the segmenter: the packet then spans all of b.
func NewIPv6(b []byte) (IPv6, bool) {
	if len(b) < IPv6Len || b[0]>>4 != 6 {
		return nil, false
	}
	n := IPv6Len + int(binary.BigEndian.Uint16(b[4:]))
	if n == IPv6Len {
		n = len(b)
	}
	if n > len(b) {
		return nil, false
	}
	return IPv6(b[:n]), true
}

func (p IPv6) TrafficClass() uint8 { return uint8(binary.BigEndian.Uint16(p[0:]) >> 4) }
func (p IPv6) FlowLabel() uint32   { return binary.BigEndian.Uint32(p[0:]) & 0xfffff }
func (p IPv6) PayloadLen() int     { return int(binary.BigEndian.Uint16(p[4:])) }
func (p IPv6) NextHeader() uint8   { return p[6] }
func (p IPv6) HopLimit() uint8     { return p[7] }
func (p IPv6) SetHopLimit(h uint8) { p[7] = h }
func (p IPv6) Src() (a [16]byte)   { copy(a[:], p[8:24]); return }
func (p IPv6) Dst() (a [16]byte)   { copy(a[:], p[24:40]); return }
func (p IPv6) Payload() []byte     { return p[IPv6Len:] }
func (p IPv6) Header() []byte      { return p[:IPv6Len] }
func (p IPv6) SetPayloadLen(n int) { binary.BigEndian.PutUint16(p[4:], uint16(n)) }

// SetSrc and SetDst rewrite an address. There is no header checksum to update: the upper
// layer's covers the address (Adjust16 updates it, as NAT66 must).
func (p IPv6) SetSrc(a [16]byte) { copy(p[8:24], a[:]) }
func (p IPv6) SetDst(a [16]byte) { copy(p[24:40], a[:]) }

// PutIPv6 writes a fixed header (IPv6Len bytes) into b: traffic class and flow label 0.
func PutIPv6(b []byte, payloadLen int, nextHeader, hopLimit uint8, src, dst [16]byte) {
	p := IPv6(b[:IPv6Len])
	binary.BigEndian.PutUint32(p[0:], 6<<28)
	p.SetPayloadLen(payloadLen)
	p[6], p[7] = nextHeader, hopLimit
	p.SetSrc(src)
	p.SetDst(dst)
}

// PseudoSum6 is the sum of the IPv6 pseudo-header of an upper-layer packet (RFC 8200 §8.1):
// both addresses, the upper-layer length as 32 bits and the next header value of the upper
// layer (not of an extension header before it). TCP, UDP and ICMPv6 checksums start from it.
func PseudoSum6(src, dst [16]byte, nextHeader uint8, length int) uint32 {
	acc := Sum(src[:], 0)
	acc = Sum(dst[:], acc)
	return acc + uint32(length)>>16 + uint32(length)&0xffff + uint32(nextHeader)
}

// Adjust16 is Adjust for a 16-byte field, an IPv6 address that NAT66 rewrites in a pseudo
// header (RFC 1624's arithmetic, as Adjust4).
func Adjust16(hc uint16, m, m2 [16]byte) uint16 { return ^Fold(uint32(^hc) + Diff16(m, m2)) }

// Diff16 is Diff4 for a 16-byte field: the unfolded ones' complement change from m to m2.
func Diff16(m, m2 [16]byte) uint32 {
	var d uint32
	for i := 0; i < 16; i += 2 {
		d += uint32(^binary.BigEndian.Uint16(m[i:])) + uint32(binary.BigEndian.Uint16(m2[i:]))
	}
	return d
}
