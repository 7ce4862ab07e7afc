package header

import "encoding/binary"

// IP protocol numbers the router knows.
const (
	ProtoICMP = 1
	ProtoTCP  = 6
	ProtoUDP  = 17
)

// IPv4Len is the length of an IPv4 header without options.
const IPv4Len = 20

// IPv4 is an IPv4 header view; it spans the whole IP packet (header and payload).
type IPv4 []byte

// NewIPv4 returns the view of the IPv4 packet at the start of b, trimmed to its total length,
// or false when b holds no valid IPv4 header. A total length of 0 is accepted for TSO
// super-frames whose length the stack left to the segmenter; the packet then spans all of b.
func NewIPv4(b []byte) (IPv4, bool) {
	if len(b) < IPv4Len || b[0]>>4 != 4 {
		return nil, false
	}
	hl := int(b[0]&15) * 4
	tl := int(binary.BigEndian.Uint16(b[2:]))
	if tl == 0 {
		tl = len(b)
	}
	if hl < IPv4Len || tl < hl || tl > len(b) {
		return nil, false
	}
	return IPv4(b[:tl]), true
}

func (p IPv4) HeaderLen() int          { return int(p[0]&15) * 4 }
func (p IPv4) TotalLen() int           { return len(p) }
func (p IPv4) Protocol() uint8         { return p[9] }
func (p IPv4) Checksum() uint16        { return binary.BigEndian.Uint16(p[10:]) }
func (p IPv4) SetChecksum(c uint16)    { binary.BigEndian.PutUint16(p[10:], c) }
func (p IPv4) Src() (a [4]byte)        { copy(a[:], p[12:16]); return }
func (p IPv4) Dst() (a [4]byte)        { copy(a[:], p[16:20]); return }
func (p IPv4) Payload() []byte         { return p[p.HeaderLen():] }
func (p IPv4) Header() []byte          { return p[:p.HeaderLen()] }
func (p IPv4) ComputeChecksum() uint16 { return Checksum(p.Header()[:10], Sum(p.Header()[12:], 0)) }

// Fragmented reports whether the packet is a fragment (more fragments, or an offset).
func (p IPv4) Fragmented() bool { return binary.BigEndian.Uint16(p[6:])&0x3fff != 0 }

// SetSrc and SetDst rewrite an address and update the header checksum incrementally.
func (p IPv4) SetSrc(a [4]byte) {
	p.SetChecksum(Adjust4(p.Checksum(), p.Src(), a))
	copy(p[12:16], a[:])
}
func (p IPv4) SetDst(a [4]byte) {
	p.SetChecksum(Adjust4(p.Checksum(), p.Dst(), a))
	copy(p[16:20], a[:])
}

// PutIPv4 writes a header without options (IPv4Len bytes) into b, checksum included.
func PutIPv4(b []byte, totalLen int, protocol uint8, src, dst [4]byte) {
	b[0], b[1] = 0x45, 0
	binary.BigEndian.PutUint16(b[2:], uint16(totalLen))
	binary.BigEndian.PutUint32(b[4:], 0)
	b[8], b[9] = 64, protocol
	copy(b[12:16], src[:])
	copy(b[16:20], dst[:])
	h := IPv4(b[:IPv4Len])
	h.SetChecksum(0)
	h.SetChecksum(h.ComputeChecksum())
}
