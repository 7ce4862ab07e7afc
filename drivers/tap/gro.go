package tap

import (
	"encoding/binary"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// sum is the folded ones' complement sum of b and acc (0xffff: a checksum over its own field
// verifies).
func sum(b []byte, acc uint64) uint16 { return header.Fold64(header.Sum64(b, acc)) }

// Writing TCP segments to a TAP costs a system call and a pass through the kernel's stack each.
// Like the kernel's GRO on a NIC, Write joins consecutive full-size segments of one TCP/IPv4 flow
// into one super-frame with a virtio-net GSO header, so the kernel takes a burst of a bulk
// transfer in one write and one pass. Only segments whose checksums are correct are joined (the
// super-frame's checksum is the kernel's to compute, which would hide a bad one), and only when
// nothing but the sequence number, IP ID, lengths and checksums differs, as the kernel requires.

const (
	maxIPTotal = 65535
	// maxJoin bounds a super-frame's segments (and Write's iovecs).
	maxJoin = 64
)

// tcpSegment is a frame Write may join: an IPv4 TCP segment with payload, plain ACK (or
// ACK|PSH), no IP options (a joined one's IP header is IPv4Len bytes) or fragmentation,
// complete checksums that verify.
type tcpSegment struct {
	hdrLen  int // Ethernet + IP + TCP header
	payload int
	seq     uint32
	psh     bool
}

// parseSegment reports whether frame is such a segment.
func parseSegment(frame []byte, o *netdev.Offload) (tcpSegment, bool) {
	var s tcpSegment
	if o.GSOType != netdev.GSONone || o.Flags&netdev.OffloadNeedsCsum != 0 || len(frame) < header.EthLen+header.IPv4Len+header.TCPLen {
		return s, false
	}
	ip := header.IPv4(frame[header.EthLen:])
	if header.Eth(frame).Type() != header.EtherTypeIPv4 || ip[0] != 0x45 || ip.Protocol() != header.ProtoTCP ||
		ip.Fragmented() || int(binary.BigEndian.Uint16(ip[2:])) != len(ip) {
		return s, false
	}
	tcp := ip[header.IPv4Len:]
	doff := int(tcp[12]>>4) * 4
	flags := header.TCPFlags(tcp)
	if doff < header.TCPLen || doff > len(tcp) || flags&^header.TCPPsh != header.TCPAck {
		return s, false
	}
	s.hdrLen, s.payload = header.EthLen+header.IPv4Len+doff, len(tcp)-doff
	s.seq, s.psh = header.TCPSeq(tcp), flags&header.TCPPsh != 0
	if s.payload == 0 || sum(ip[:header.IPv4Len], 0) != 0xffff ||
		sum(tcp, pseudoSum(ip, len(tcp))) != 0xffff {
		return s, false
	}
	return s, true
}

// joins reports whether segment b (frame fb) may follow a run that starts with a (frame fa)
// and ends with prev.
func joins(fa []byte, a tcpSegment, prev tcpSegment, fb []byte, b tcpSegment) bool {
	if prev.psh || prev.payload != a.payload || b.payload > a.payload || b.hdrLen != a.hdrLen ||
		b.seq != prev.seq+uint32(prev.payload) {
		return false
	}
	ia, ib := fa[header.EthLen:], fb[header.EthLen:]
	// Ethernet header, then IP's version..TOS, flags+offset..protocol, addresses; TCP's ports,
	// ACK number, offset+flags (less PSH)+window, urgent pointer and options.
	return string(fa[:header.EthLen]) == string(fb[:header.EthLen]) &&
		string(ia[:2]) == string(ib[:2]) && string(ia[6:10]) == string(ib[6:10]) &&
		string(ia[12:20]) == string(ib[12:20]) &&
		string(ia[20:24]) == string(ib[20:24]) && string(ia[28:32]) == string(ib[28:32]) &&
		ia[32] == ib[32] && ia[33]&^header.TCPPsh == ib[33]&^header.TCPPsh && string(ia[34:36]) == string(ib[34:36]) &&
		string(ia[38:a.hdrLen-header.EthLen]) == string(ib[38:b.hdrLen-header.EthLen])
}

// run returns how many frames from frames[i] on form one super-frame (1: write it alone) and,
// when they are more than one, the first's segment.
func run(frames [][]byte, offs []netdev.Offload, i int) (int, tcpSegment) {
	var none netdev.Offload
	off := func(k int) *netdev.Offload {
		if offs == nil {
			return &none
		}
		return &offs[k]
	}
	a, ok := parseSegment(frames[i], off(i))
	if !ok {
		return 1, a
	}
	prev, total := a, a.hdrLen-header.EthLen+a.payload
	n := 1
	for k := i + 1; k < len(frames) && n < maxJoin; k++ {
		b, ok := parseSegment(frames[k], off(k))
		if !ok || total+b.payload > maxIPTotal || !joins(frames[i], a, prev, frames[k], b) {
			break
		}
		prev, total = b, total+b.payload
		n++
	}
	return n, a
}

// superHeader writes into h (at least a.hdrLen bytes) the headers of the super-frame made of
// the first segment's headers and payload bytes of payload in all, with PSH if the last had
// it, and returns the GSO metadata for the kernel.
func superHeader(h, first []byte, a tcpSegment, payload int, psh bool) netdev.Offload {
	copy(h, first[:a.hdrLen])
	ip := h[header.EthLen:a.hdrLen]
	tcpLen := a.hdrLen - header.EthLen - header.IPv4Len + payload
	binary.BigEndian.PutUint16(ip[2:], uint16(header.IPv4Len+tcpLen))
	binary.BigEndian.PutUint16(ip[10:], 0)
	binary.BigEndian.PutUint16(ip[10:], header.Checksum64(ip[:header.IPv4Len], 0))
	if psh {
		ip[header.IPv4Len+13] |= header.TCPPsh
	}
	// A partial checksum, as the kernel keeps it: the pseudo header's sum, not complemented.
	binary.BigEndian.PutUint16(ip[header.IPv4Len+header.TCPChecksumOff:], header.Fold64(pseudoSum(ip, tcpLen)))
	return netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOTCPv4, HdrLen: uint16(a.hdrLen),
		GSOSize: uint16(a.payload), CsumStart: header.EthLen + header.IPv4Len, CsumOffset: header.TCPChecksumOff}
}

// pseudoSum is the unfolded sum of the TCP pseudo header of IPv4 header ip.
func pseudoSum(ip []byte, tcpLen int) uint64 {
	return uint64(binary.BigEndian.Uint32(ip[12:])) + uint64(binary.BigEndian.Uint32(ip[16:])) + header.ProtoTCP + uint64(tcpLen)
}
