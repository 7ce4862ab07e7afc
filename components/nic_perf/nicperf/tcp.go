package nicperf

import (
	"encoding/binary"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// A minimal TCP exchange in raw frames, enough for a router's link states to go through
// opening, open, closing and closed: the generator sends, per connection, SYN, ACK with data,
// FIN|ACK and the last ACK without waiting for the peer (at a moderate rate its answers come
// in between); the peer answers SYN with SYN|ACK and FIN with FIN|ACK.

const (
	clientISN = 1000
	serverISN = 5000
)

// tcpLen is the frame length of the next generated segment: only the data segment carries
// data (to Size).
func (p *Perf) tcpLen() int {
	if p.tcpStep == 1 {
		return p.cfg.Size
	}
	return header.EthLen + header.IPv4Len + header.TCPLen
}

// nextTCP writes the next generated segment into b (of tcpLen bytes).
func (p *Perf) nextTCP(b []byte) {
	c := p.cfg
	port := c.SrcPort + uint16(p.flow)
	data := uint32(c.Size - tcpMinSize + 1)
	var flags uint8
	var seq, ack uint32
	switch p.tcpStep {
	case 0:
		flags, seq = header.TCPSyn, clientISN
	case 1:
		flags, seq, ack = header.TCPAck|header.TCPPsh, clientISN+1, serverISN+1
	case 2:
		flags, seq, ack = header.TCPFin|header.TCPAck, clientISN+1+data, serverISN+1
	case 3:
		flags, seq, ack = header.TCPAck, clientISN+2+data, serverISN+2
	}
	p.tcpStep++
	if p.tcpStep == 4 {
		p.tcpStep = 0
		p.flow = (p.flow + 1) % c.Flows
	}
	putTCP(b, c.MAC, p.dstMAC, p.ip, c.DstIP, port, c.DstPort, flags, seq, ack)
}

// putTCP writes a whole frame: Ethernet, IPv4, a 20-byte TCP header and, to len(b), data.
func putTCP(b []byte, src, dst header.MAC, srcIP, dstIP [4]byte, sport, dport uint16, flags uint8, seq, ack uint32) {
	seg := putIPv4(b, src, dst, header.ProtoTCP, srcIP, dstIP)
	for i := header.TCPLen; i < len(seg); i++ {
		seg[i] = byte(i)
	}
	header.Ports(seg).SetSrc(sport)
	header.Ports(seg).SetDst(dport)
	binary.BigEndian.PutUint32(seg[4:], seq)
	binary.BigEndian.PutUint32(seg[8:], ack)
	seg[12] = (header.TCPLen / 4) << 4 // data offset in words
	seg[13] = flags
	binary.BigEndian.PutUint16(seg[14:], 65535)
	binary.BigEndian.PutUint16(seg[header.TCPChecksumOff:], 0)
	binary.BigEndian.PutUint16(seg[18:], 0)
	binary.BigEndian.PutUint16(seg[header.TCPChecksumOff:], header.Checksum(seg, header.PseudoSum(srcIP, dstIP, header.ProtoTCP, len(seg))))
}

// answerTCP answers a SYN with SYN|ACK and a FIN with FIN|ACK (acknowledging it and closing
// our side at once); other segments need no answer.
func (p *Perf) answerTCP(out *packetstream.Source, in header.Eth, ip header.IPv4, seg []byte) {
	flags := header.TCPFlags(seg)
	var rflags uint8
	var seq, ack uint32
	switch {
	case flags&(header.TCPSyn|header.TCPAck) == header.TCPSyn:
		rflags, seq, ack = header.TCPSyn|header.TCPAck, serverISN, header.TCPSeq(seg)+1
	case flags&header.TCPFin != 0 && flags&header.TCPRst == 0:
		rflags, seq = header.TCPFin|header.TCPAck, serverISN+1
		ack = header.TCPSeq(seg) + uint32(header.TCPPayloadLen(seg)) + 1
	default:
		return
	}
	buf := p.alloc(out, header.EthLen+header.IPv4Len+header.TCPLen)
	if buf == nil {
		return
	}
	ports := header.Ports(seg)
	putTCP(buf, p.cfg.MAC, in.Src(), ip.Dst(), ip.Src(), ports.Dst(), ports.Src(), rflags, seq, ack)
	p.submit(out)
	p.answers++
}
