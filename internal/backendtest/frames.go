// Package backendtest is the shared root test of the Linux back ends (TAP, AF_PACKET): a
// kernel network stack in a namespace on one side, the back end under test on the other, and
// the test playing the remote host by building and parsing IPv4 frames itself, super-frames
// with offload metadata included. It also builds frames for the back ends' benchmarks.
package backendtest

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/nicstack/nicstack/netdev"
)

// IP protocol numbers and TCP flags the tests use.
const (
	ProtoICMP = 1
	ProtoTCP  = 6
	ProtoUDP  = 17

	FlagFIN = 0x01
	FlagSYN = 0x02
	FlagRST = 0x04
	FlagPSH = 0x08
	FlagACK = 0x10
)

const (
	ethLen  = 14
	ipLen   = 20
	l4Start = ethLen + ipLen
)

// Endpoint is one end of an IPv4 path on an Ethernet segment.
type Endpoint struct {
	MAC net.HardwareAddr
	IP  netip.Addr
}

// Path builds frames from Src to Dst.
type Path struct{ Src, Dst Endpoint }

// Reverse is the path back.
func (p Path) Reverse() Path { return Path{Src: p.Dst, Dst: p.Src} }

// frame returns Ethernet and IPv4 headers for an l4len-byte payload of proto, with room for it.
func (p Path) frame(proto byte, l4len int) []byte {
	f := make([]byte, l4Start+l4len)
	copy(f[0:6], p.Dst.MAC)
	copy(f[6:12], p.Src.MAC)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[ethLen:l4Start]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(ipLen+l4len))
	ip[6] = 0x40 // DF
	ip[8] = 64
	ip[9] = proto
	src, dst := p.Src.IP.As4(), p.Dst.IP.As4()
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	binary.BigEndian.PutUint16(ip[10:], ^fold(sum(ip, 0)))
	return f
}

// UDP builds a UDP frame. partial leaves the checksum to the receiver of the metadata
// (NEEDS_CSUM, as a guest with checksum offload sends it); otherwise it is complete.
func (p Path) UDP(sport, dport uint16, payload []byte, partial bool) ([]byte, netdev.Offload) {
	f := p.frame(ProtoUDP, 8+len(payload))
	u := f[l4Start:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	copy(u[8:], payload)
	return f, checksum(f, 6, partial)
}

// TCP builds a TCP segment with options opts (a multiple of 4 bytes). With mss > 0 and a
// payload longer than mss it is a GSO super-frame (GSO_TCPV4, NEEDS_CSUM) as a TSO-capable
// sender hands it over; otherwise its checksum is complete.
func (p Path) TCP(sport, dport uint16, seq, ack uint32, flags byte, opts, payload []byte, mss uint16) ([]byte, netdev.Offload) {
	hl := 20 + len(opts)
	f := p.frame(ProtoTCP, hl+len(payload))
	t := f[l4Start:]
	binary.BigEndian.PutUint16(t[0:], sport)
	binary.BigEndian.PutUint16(t[2:], dport)
	binary.BigEndian.PutUint32(t[4:], seq)
	binary.BigEndian.PutUint32(t[8:], ack)
	t[12] = byte(hl/4) << 4
	t[13] = flags
	binary.BigEndian.PutUint16(t[14:], 65535)
	copy(t[20:], opts)
	copy(t[hl:], payload)
	gso := mss > 0 && len(payload) > int(mss)
	o := checksum(f, 16, gso)
	if gso {
		o.GSOType, o.GSOSize, o.HdrLen = netdev.GSOTCPv4, mss, uint16(l4Start+hl)
	}
	return f, o
}

// MSSOption is the TCP option announcing maximum segment size mss.
func MSSOption(mss uint16) []byte { return []byte{2, 4, byte(mss >> 8), byte(mss)} }

// checksum fills the L4 checksum at offset off: in full, or as the pseudo-header sum that the
// NEEDS_CSUM receiver completes.
func checksum(f []byte, off int, partial bool) netdev.Offload {
	l4 := f[l4Start:]
	ph := pseudo(f)
	if partial {
		binary.BigEndian.PutUint16(l4[off:], fold(ph))
		return netdev.Offload{Flags: netdev.OffloadNeedsCsum, CsumStart: l4Start, CsumOffset: uint16(off)}
	}
	c := ^fold(sum(l4, ph))
	if c == 0 && f[ethLen+9] == ProtoUDP {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(l4[off:], c)
	return netdev.Offload{}
}

func pseudo(f []byte) uint32 {
	ip := f[ethLen:l4Start]
	return sum(ip[12:20], uint32(ip[9])+uint32(len(f)-l4Start))
}

func sum(b []byte, s uint32) uint32 {
	for ; len(b) >= 2; b = b[2:] {
		s += uint32(b[0])<<8 | uint32(b[1])
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// Packet is a parsed IPv4 frame.
type Packet struct {
	Frame        []byte
	Off          netdev.Offload
	Proto        byte
	Src, Dst     netip.Addr
	SPort, DPort uint16 // UDP and TCP
	Type         byte   // ICMP
	Seq, Ack     uint32 // TCP
	Flags        byte   // TCP
	Payload      []byte
	ChecksumOK   bool // IPv4 header and (for frames that are not GSO) L4 checksum, after completing NEEDS_CSUM
}

// Parse parses an Ethernet frame carrying IPv4 (20-byte header) and its offload metadata.
// It completes a partial checksum in place. ok is false for anything else.
func Parse(frame []byte, o netdev.Offload) (p Packet, ok bool) {
	if len(frame) < l4Start || binary.BigEndian.Uint16(frame[12:]) != 0x0800 || frame[ethLen] != 0x45 {
		return p, false
	}
	ip := frame[ethLen:l4Start]
	tot := int(binary.BigEndian.Uint16(ip[2:]))
	if tot < ipLen || ethLen+tot > len(frame) {
		return p, false
	}
	frame = frame[:ethLen+tot]
	p = Packet{Frame: frame, Off: o, Proto: ip[9],
		Src: netip.AddrFrom4([4]byte(ip[12:16])), Dst: netip.AddrFrom4([4]byte(ip[16:20]))}
	l4 := frame[l4Start:]
	if o.Flags&netdev.OffloadNeedsCsum != 0 {
		s, c := int(o.CsumStart), int(o.CsumStart)+int(o.CsumOffset)
		if c+2 > len(frame) {
			return p, false
		}
		binary.BigEndian.PutUint16(frame[c:], ^fold(sum(frame[s:], 0)))
	}
	p.ChecksumOK = fold(sum(ip, 0)) == 0xffff
	switch p.Proto {
	case ProtoICMP:
		if len(l4) < 8 {
			return p, false
		}
		p.Type, p.Payload = l4[0], l4[8:]
		p.ChecksumOK = p.ChecksumOK && fold(sum(l4, 0)) == 0xffff
	case ProtoUDP:
		if len(l4) < 8 {
			return p, false
		}
		p.SPort, p.DPort, p.Payload = binary.BigEndian.Uint16(l4[0:]), binary.BigEndian.Uint16(l4[2:]), l4[8:]
		p.ChecksumOK = p.ChecksumOK && fold(sum(l4, pseudo(frame))) == 0xffff
	case ProtoTCP:
		if len(l4) < 20 || int(l4[12]>>4)*4 < 20 || int(l4[12]>>4)*4 > len(l4) {
			return p, false
		}
		p.SPort, p.DPort = binary.BigEndian.Uint16(l4[0:]), binary.BigEndian.Uint16(l4[2:])
		p.Seq, p.Ack, p.Flags = binary.BigEndian.Uint32(l4[4:]), binary.BigEndian.Uint32(l4[8:]), l4[13]
		p.Payload = l4[int(l4[12]>>4)*4:]
		if o.GSOType == netdev.GSONone {
			p.ChecksumOK = p.ChecksumOK && fold(sum(l4, pseudo(frame))) == 0xffff
		}
	}
	return p, true
}
