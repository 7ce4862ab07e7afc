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
	"github.com/nicstack/nicstack/netdev/header"
)

// l4Start is where the transport header of the frames built and parsed here starts: they
// carry no IP options.
const l4Start = header.EthLen + header.IPv4Len

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
	e := header.Eth(f)
	e.SetDst(header.MAC(p.Dst.MAC))
	e.SetSrc(header.MAC(p.Src.MAC))
	e.SetType(header.EtherTypeIPv4)
	ip := header.IPv4(e.Payload())
	header.PutIPv4(ip, len(ip), proto, p.Src.IP.As4(), p.Dst.IP.As4())
	ip[6] = 0x40 // DF, as the kernel sends
	ip.SetChecksum(ip.ComputeChecksum())
	return f
}

// UDP builds a UDP frame. partial leaves the checksum to the receiver of the metadata
// (NEEDS_CSUM, as a guest with checksum offload sends it); otherwise it is complete.
func (p Path) UDP(sport, dport uint16, payload []byte, partial bool) ([]byte, netdev.Offload) {
	f := p.frame(header.ProtoUDP, header.UDPLen+len(payload))
	u := f[l4Start:]
	copy(u[header.UDPLen:], payload)
	if !partial {
		header.PutUDP(u, p.Src.IP.As4(), p.Dst.IP.As4(), sport, dport)
		return f, netdev.Offload{}
	}
	header.Ports(u).SetSrc(sport)
	header.Ports(u).SetDst(dport)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	return f, checksum(f, header.UDPChecksumOff, true)
}

// TCP builds a TCP segment with options opts (a multiple of 4 bytes). With mss > 0 and a
// payload longer than mss it is a GSO super-frame (GSO_TCPV4, NEEDS_CSUM) as a TSO-capable
// sender hands it over; otherwise its checksum is complete.
func (p Path) TCP(sport, dport uint16, seq, ack uint32, flags byte, opts, payload []byte, mss uint16) ([]byte, netdev.Offload) {
	hl := header.TCPLen + len(opts)
	f := p.frame(header.ProtoTCP, hl+len(payload))
	t := f[l4Start:]
	header.Ports(t).SetSrc(sport)
	header.Ports(t).SetDst(dport)
	binary.BigEndian.PutUint32(t[4:], seq)
	binary.BigEndian.PutUint32(t[8:], ack)
	t[12] = byte(hl/4) << 4
	t[13] = flags
	binary.BigEndian.PutUint16(t[14:], 65535)
	copy(t[header.TCPLen:], opts)
	copy(t[hl:], payload)
	gso := mss > 0 && len(payload) > int(mss)
	o := checksum(f, header.TCPChecksumOff, gso)
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
		binary.BigEndian.PutUint16(l4[off:], header.Fold(ph))
		return netdev.Offload{Flags: netdev.OffloadNeedsCsum, CsumStart: l4Start, CsumOffset: uint16(off)}
	}
	binary.BigEndian.PutUint16(l4[off:], header.Checksum(l4, ph))
	return netdev.Offload{}
}

// pseudo is the pseudo-header sum of the transport segment of frame f.
func pseudo(f []byte) uint32 {
	ip := header.IPv4(f[header.EthLen:])
	return header.PseudoSum(ip.Src(), ip.Dst(), ip.Protocol(), len(f)-l4Start)
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
	if len(frame) < l4Start || header.Eth(frame).Type() != header.EtherTypeIPv4 || frame[header.EthLen] != 0x45 {
		return p, false
	}
	tot := int(binary.BigEndian.Uint16(frame[header.EthLen+2:]))
	if tot < header.IPv4Len || header.EthLen+tot > len(frame) {
		return p, false
	}
	frame = frame[:header.EthLen+tot]
	ip := header.IPv4(frame[header.EthLen:])
	p = Packet{Frame: frame, Off: o, Proto: ip.Protocol(), Src: netip.AddrFrom4(ip.Src()), Dst: netip.AddrFrom4(ip.Dst())}
	l4 := ip.Payload()
	if o.Flags&netdev.OffloadNeedsCsum != 0 {
		s, c := int(o.CsumStart), int(o.CsumStart)+int(o.CsumOffset)
		if c+2 > len(frame) {
			return p, false
		}
		binary.BigEndian.PutUint16(frame[c:], header.Checksum(frame[s:], 0))
	}
	p.ChecksumOK = header.Checksum(ip.Header(), 0) == 0
	switch p.Proto {
	case header.ProtoICMP:
		if len(l4) < header.ICMPLen {
			return p, false
		}
		m := header.ICMP(l4)
		p.Type, p.Payload = m.Type(), m.Body()
		p.ChecksumOK = p.ChecksumOK && header.Checksum(l4, 0) == 0
	case header.ProtoUDP, header.ProtoTCP:
		seg, fits := header.L4Header(ip)
		if !fits {
			return p, false
		}
		p.SPort, p.DPort = header.Ports(seg).Src(), header.Ports(seg).Dst()
		if p.Proto == header.ProtoUDP {
			p.Payload = seg[header.UDPLen:]
		} else {
			p.Seq, p.Ack, p.Flags = header.TCPSeq(seg), header.TCPAckNum(seg), header.TCPFlags(seg)
			p.Payload = seg[len(seg)-header.TCPPayloadLen(seg):]
		}
		if p.Proto == header.ProtoUDP || o.GSOType == netdev.GSONone {
			p.ChecksumOK = p.ChecksumOK && header.Checksum(seg, pseudo(frame)) == 0
		}
	}
	return p, true
}
