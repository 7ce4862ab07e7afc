package header

import "encoding/binary"

// TCP flags.
const (
	TCPFin = 0x01
	TCPSyn = 0x02
	TCPRst = 0x04
	TCPPsh = 0x08
	TCPAck = 0x10
	TCPCwr = 0x80
)

// Header lengths: TCP without options, UDP.
const (
	TCPLen = 20
	UDPLen = 8
)

// Ports is a view of the first 4 bytes of a TCP or UDP header.
type Ports []byte

func (p Ports) Src() uint16     { return binary.BigEndian.Uint16(p[0:]) }
func (p Ports) Dst() uint16     { return binary.BigEndian.Uint16(p[2:]) }
func (p Ports) SetSrc(v uint16) { binary.BigEndian.PutUint16(p[0:], v) }
func (p Ports) SetDst(v uint16) { binary.BigEndian.PutUint16(p[2:], v) }

// Where the 16-bit checksum lives in a TCP segment and in a UDP datagram.
const (
	TCPChecksumOff = 16
	UDPChecksumOff = 6
)

// L4Header returns the TCP or UDP segment of ip, or false when the header does not fit.
func L4Header(ip IPv4) (seg []byte, ok bool) {
	seg = ip.Payload()
	switch ip.Protocol() {
	case ProtoTCP:
		if len(seg) < TCPLen || int(seg[12]>>4)*4 < TCPLen || int(seg[12]>>4)*4 > len(seg) {
			return nil, false
		}
		return seg, true
	case ProtoUDP:
		if len(seg) < UDPLen {
			return nil, false
		}
		return seg, true
	}
	return nil, false
}

// PutUDP writes the UDP header of datagram seg (header and the payload already in place) from
// sport to dport, its length and its checksum over the pseudo header of src and dst.
func PutUDP(seg []byte, src, dst [4]byte, sport, dport uint16) {
	Ports(seg).SetSrc(sport)
	Ports(seg).SetDst(dport)
	binary.BigEndian.PutUint16(seg[4:], uint16(len(seg)))
	binary.BigEndian.PutUint16(seg[UDPChecksumOff:], 0)
	c := Checksum(seg, PseudoSum(src, dst, ProtoUDP, len(seg)))
	if c == 0 {
		c = 0xffff // 0 would say the datagram has no checksum (RFC 768)
	}
	binary.BigEndian.PutUint16(seg[UDPChecksumOff:], c)
}

// TCPFlags returns the flag byte of a TCP segment.
func TCPFlags(seg []byte) uint8 { return seg[13] }

// TCPSeq and TCPAckNum return the sequence and acknowledgement numbers.
func TCPSeq(seg []byte) uint32    { return binary.BigEndian.Uint32(seg[4:]) }
func TCPAckNum(seg []byte) uint32 { return binary.BigEndian.Uint32(seg[8:]) }

// TCPPayloadLen is the length of the segment's data.
func TCPPayloadLen(seg []byte) int { return len(seg) - int(seg[12]>>4)*4 }

// ICMP types the router handles.
const (
	ICMPEchoReply   = 0
	ICMPDestUnreach = 3
	ICMPEchoRequest = 8
)

// ICMPHostUnreachable is the destination-unreachable code the router answers unroutable
// packets with.
const ICMPHostUnreachable = 1

// ICMPLen is the length of an ICMP header (type, code, checksum, rest-of-header).
const ICMPLen = 8

// ICMP is an ICMP message view.
type ICMP []byte

func (m ICMP) Type() uint8          { return m[0] }
func (m ICMP) Code() uint8          { return m[1] }
func (m ICMP) Checksum() uint16     { return binary.BigEndian.Uint16(m[2:]) }
func (m ICMP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(m[2:], c) }
func (m ICMP) ID() uint16           { return binary.BigEndian.Uint16(m[4:]) }
func (m ICMP) Body() []byte         { return m[ICMPLen:] }

// SetID rewrites the echo identifier and updates the checksum incrementally.
func (m ICMP) SetID(id uint16) {
	m.SetChecksum(Adjust(m.Checksum(), m.ID(), id))
	binary.BigEndian.PutUint16(m[4:], id)
}

// UpdateChecksum computes the checksum over the whole message.
func (m ICMP) UpdateChecksum() {
	m.SetChecksum(0)
	m.SetChecksum(Checksum(m, 0))
}
