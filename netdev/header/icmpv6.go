package header

import "encoding/binary"

// ICMPv6 types (RFC 4443, and RFC 4861's NDP messages): errors are below 128.
const (
	ICMPv6DestUnreach  = 1
	ICMPv6PacketTooBig = 2
	ICMPv6TimeExceeded = 3
	ICMPv6ParamProblem = 4
	ICMPv6EchoRequest  = 128
	ICMPv6EchoReply    = 129
	NDPRouterSolicit   = 133
	NDPRouterAdvert    = 134
	NDPNeighborSolicit = 135
	NDPNeighborAdvert  = 136
	NDPRedirect        = 137
)

// Destination unreachable codes (RFC 4443 §3.1).
const (
	ICMPv6NoRoute         = 0
	ICMPv6AdminProhibited = 1
	ICMPv6BeyondScope     = 2
	ICMPv6AddrUnreachable = 3
	ICMPv6PortUnreachable = 4
	ICMPv6SourcePolicy    = 5
	ICMPv6RejectRoute     = 6
)

// Time exceeded codes (RFC 4443 §3.3).
const (
	ICMPv6HopLimitExceeded  = 0
	ICMPv6ReassemblyTimeout = 1
)

// Parameter problem codes (RFC 4443 §3.4).
const (
	ICMPv6ErroneousHeader   = 0
	ICMPv6UnknownNextHeader = 1
	ICMPv6UnknownOption     = 2
)

// ICMPv6Len is the length of an ICMPv6 header: type, code, checksum and the 4 bytes every
// message of RFC 4443 and 4861 has next (identifier and sequence, MTU, pointer, flags or
// reserved).
const ICMPv6Len = 8

// ICMPv6 is an ICMPv6 message view. Its checksum covers the IPv6 pseudo-header, so computing
// or checking it takes the packet's addresses.
type ICMPv6 []byte

// NewICMPv6 returns the view of the ICMPv6 message b, or false when b is shorter than a
// header.
func NewICMPv6(b []byte) (ICMPv6, bool) {
	if len(b) < ICMPv6Len {
		return nil, false
	}
	return ICMPv6(b), true
}

func (m ICMPv6) Type() uint8          { return m[0] }
func (m ICMPv6) Code() uint8          { return m[1] }
func (m ICMPv6) Checksum() uint16     { return binary.BigEndian.Uint16(m[2:]) }
func (m ICMPv6) SetChecksum(c uint16) { binary.BigEndian.PutUint16(m[2:], c) }
func (m ICMPv6) IsError() bool        { return m[0] < 128 }
func (m ICMPv6) Body() []byte         { return m[ICMPv6Len:] }

// ID and Seq are an echo's identifier and sequence number, MTU a packet too big's MTU and
// Pointer a parameter problem's pointer.
func (m ICMPv6) ID() uint16      { return binary.BigEndian.Uint16(m[4:]) }
func (m ICMPv6) Seq() uint16     { return binary.BigEndian.Uint16(m[6:]) }
func (m ICMPv6) MTU() uint32     { return binary.BigEndian.Uint32(m[4:]) }
func (m ICMPv6) Pointer() uint32 { return binary.BigEndian.Uint32(m[4:]) }

// SetID rewrites the echo identifier and updates the checksum incrementally.
func (m ICMPv6) SetID(id uint16) {
	m.SetChecksum(Adjust(m.Checksum(), m.ID(), id))
	binary.BigEndian.PutUint16(m[4:], id)
}

// ComputeChecksum is the checksum of the message between src and dst, its own checksum field
// taken as zero.
func (m ICMPv6) ComputeChecksum(src, dst [16]byte) uint16 {
	return Checksum(m[:2], Sum(m[4:], PseudoSum6(src, dst, ProtoICMPv6, len(m))))
}

// UpdateChecksum sets the checksum of the message between src and dst.
func (m ICMPv6) UpdateChecksum(src, dst [16]byte) { m.SetChecksum(m.ComputeChecksum(src, dst)) }

// ChecksumValid reports whether the message's checksum is right for src and dst.
func (m ICMPv6) ChecksumValid(src, dst [16]byte) bool {
	return Fold(Sum(m, PseudoSum6(src, dst, ProtoICMPv6, len(m)))) == 0xffff
}

// PutICMPv6Echo writes an echo request or reply header (typ) into m, whose data follows it,
// and its checksum between src and dst.
func PutICMPv6Echo(m []byte, typ uint8, id, seq uint16, src, dst [16]byte) {
	m[0], m[1] = typ, 0
	binary.BigEndian.PutUint16(m[4:], id)
	binary.BigEndian.PutUint16(m[6:], seq)
	ICMPv6(m).UpdateChecksum(src, dst)
}

// PutICMPv6Error writes into b the IPv6 packet of an error message from src to dst: type
// typ, code and param (a packet too big's MTU, a parameter problem's pointer, else 0), then
// as much of the offending packet as fits in b and keeps the whole packet within IPv6MinMTU
// bytes (RFC 4443 §2.4(c)). It returns the packet's length. offending may lie in b: it is
// moved before the headers are written.
func PutICMPv6Error(b []byte, typ, code uint8, param uint32, src, dst [16]byte, offending []byte) int {
	const at = IPv6Len + ICMPv6Len
	n := at + copy(b[at:min(len(b), IPv6MinMTU)], offending)
	PutIPv6(b, n-IPv6Len, ProtoICMPv6, 64, src, dst)
	m := ICMPv6(b[IPv6Len:n])
	m[0], m[1] = typ, code
	binary.BigEndian.PutUint32(m[4:], param)
	m.UpdateChecksum(src, dst)
	return n
}
