package ipxe

import (
	"encoding/binary"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// The emulated NIC, like iPXE's driver for it, offers neither checksum offload nor TSO, while
// frames from the router may carry a partial checksum (a guest's or a TAP's CHECKSUM_PARTIAL)
// or be TCP super-frames of up to 64 KiB. The driver does both in software, as Linux's
// skb_checksum_help and GSO do for a device without the features: it completes the checksum,
// and cuts a super-frame into segments of GSOSize bytes of payload, each with its own IP
// length, IPv4 ID and header checksum, TCP sequence number, flags and checksum. UDP
// fragmentation offload (GSOUDP) is not done: such frames are dropped and counted.

var be = binary.BigEndian

// SoftOffload is what the driver does in software for a frame to send with offload
// metadata, in front of a NIC without the features: Copy takes a frame, Next hands out the
// further segments of a super-frame. It counts in the driver's Counters.
type SoftOffload struct {
	seg segmenter
	cnt *Counters
}

// NewSoftOffload returns a SoftOffload counting in cnt (TXOffloadDropped, TXSoftCsum,
// TXSoftGSO, TXSegments).
func NewSoftOffload(cnt *Counters) *SoftOffload { return &SoftOffload{cnt: cnt} }

// Pending reports whether a super-frame is being cut: Next has its next segment.
func (s *SoftOffload) Pending() bool { return s.seg.active }

// Next writes the next segment of the super-frame Copy started into buf and returns its length.
func (s *SoftOffload) Next(buf []byte) int {
	s.cnt.TXSegments.Add(1)
	return s.seg.cut(buf)
}

// Copy writes frame, which carries o, into buf as the NIC must send it: a partial checksum
// completed, a TCP super-frame's first segment (Next gives the rest). It returns the length
// written, or a length over len(buf) for a frame to drop (too long for buf, or metadata the
// driver cannot serve). frame may be shared memory: it is read once, before Copy returns.
func (s *SoftOffload) Copy(buf, frame []byte, o netdev.Offload) int {
	n := len(frame)
	switch {
	case o.GSOType != netdev.GSONone:
		if !s.seg.start(frame, o) {
			s.cnt.TXOffloadDropped.Add(1)
			return len(buf) + 1
		}
		s.cnt.TXSoftGSO.Add(1)
		return s.Next(buf)
	case n > len(buf):
	case o.Flags&netdev.OffloadNeedsCsum != 0:
		copy(buf, frame)
		if !completeChecksum(buf[:n], int(o.CsumStart), int(o.CsumOffset)) {
			s.cnt.TXOffloadDropped.Add(1)
			return len(buf) + 1
		}
		s.cnt.TXSoftCsum.Add(1)
	default:
		copy(buf, frame)
	}
	return n
}

// completeChecksum fills in a partial checksum as a NIC with checksum offload would: the field
// at start+off holds the pseudo header's sum, the checksum covers everything from start. It
// reports false when the field lies outside the frame.
func completeChecksum(f []byte, start, off int) bool {
	if start < 0 || off < 0 || start+off+2 > len(f) {
		return false
	}
	c := ^header.Fold64(header.Sum64(f[start:], 0))
	if c == 0 {
		c = 0xffff // as skb_checksum_help: 0 means "no checksum" to UDP
	}
	be.PutUint16(f[start+off:], c)
	return true
}

// segmenter cuts one TCP super-frame into frames. It works on its own copy of the frame: the
// router's buffer may change under it (shared memory), and is acknowledged at once.
type segmenter struct {
	frame  []byte // the super-frame; cap reused
	active bool
	l3     int // offset of the IP header
	l4     int // offset of the TCP header
	hdr    int // length of all headers
	mss    int
	v6     bool
	next   int // offset of the next segment's payload
	n      int // segments cut so far
	id     uint16
	seq    uint32
	flags  uint8
}

// start takes a super-frame; false when it is not a TCP frame the segmenter can cut (its
// headers or the offload metadata do not fit it).
func (s *segmenter) start(f []byte, o netdev.Offload) bool {
	gso := o.GSOType &^ netdev.GSOECN
	if gso != netdev.GSOTCPv4 && gso != netdev.GSOTCPv6 || o.GSOSize == 0 {
		return false
	}
	s.frame = append(s.frame[:0], f...)
	f = s.frame
	l3 := header.EthLen
	if len(f) < l3 {
		return false
	}
	etype := header.Eth(f).Type()
	for etype == header.EtherTypeVLAN || etype == header.EtherTypeQinQ {
		if len(f) < l3+4 {
			return false
		}
		etype = be.Uint16(f[l3+2:])
		l3 += 4
	}
	s.v6 = gso == netdev.GSOTCPv6
	var l4, end int
	switch {
	case !s.v6 && etype == header.EtherTypeIPv4:
		ip := header.IPv4(f[l3:])
		if len(ip) < header.IPv4Len || ip[0]>>4 != 4 || ip.Protocol() != header.ProtoTCP ||
			ip.HeaderLen() < header.IPv4Len || ip.Fragmented() {
			return false
		}
		l4, end = l3+ip.HeaderLen(), l3+int(be.Uint16(ip[2:]))
	case s.v6 && etype == header.EtherTypeIPv6:
		// TCP right after the IPv6 header: no extension headers
		if len(f) < l3+40 || f[l3]>>4 != 6 || f[l3+6] != header.ProtoTCP {
			return false
		}
		l4, end = l3+40, l3+40+int(be.Uint16(f[l3+4:]))
	default:
		return false
	}
	if end > len(f) || end < l4 {
		return false
	}
	f = f[:end] // without Ethernet padding
	s.frame = f
	if int(o.CsumStart) != l4 || len(f) < l4+header.TCPLen {
		return false
	}
	doff := int(f[l4+12]>>4) * 4
	if doff < header.TCPLen || l4+doff > len(f) {
		return false
	}
	s.l3, s.l4, s.hdr, s.mss = l3, l4, l4+doff, int(o.GSOSize)
	s.next, s.n, s.active = s.hdr, 0, true
	s.seq, s.flags = be.Uint32(f[l4+4:]), f[l4+13]
	if !s.v6 {
		s.id = be.Uint16(f[l3+4:])
	}
	return true
}

// cut writes the next segment into buf and returns its length; a segment longer than buf is
// skipped and reported with n > len(buf), as Fetch reports a frame too long.
func (s *segmenter) cut(buf []byte) int {
	f := s.frame
	payload := min(s.mss, len(f)-s.next)
	n := s.hdr + payload
	first, last := s.n == 0, s.next+payload >= len(f)
	defer func() {
		s.next += payload
		s.n++
		s.active = !last
	}()
	if n > len(buf) {
		return n
	}
	copy(buf, f[:s.hdr])
	copy(buf[s.hdr:], f[s.next:s.next+payload])
	seg := buf[:n]
	l3, l4 := s.l3, s.l4
	var pseudo uint64
	if s.v6 {
		be.PutUint16(seg[l3+4:], uint16(n-l3-40))
		pseudo = uint64(header.Fold64(header.Sum64(seg[l3+8:l3+40], 0))) // addresses, folded: more is added
	} else {
		be.PutUint16(seg[l3+2:], uint16(n-l3))
		be.PutUint16(seg[l3+4:], s.id+uint16(s.n))
		be.PutUint16(seg[l3+10:], 0)
		be.PutUint16(seg[l3+10:], ^header.Fold64(header.Sum64(seg[l3:l4], 0)))
		pseudo = uint64(header.Fold64(header.Sum64(seg[l3+12:l3+20], 0)))
	}
	be.PutUint32(seg[l4+4:], s.seq+uint32(s.next-s.hdr))
	flags := s.flags // FIN and PSH belong to the last segment only, CWR to the first
	if !last {
		flags &^= header.TCPFin | header.TCPPsh
	}
	if !first {
		flags &^= header.TCPCwr
	}
	seg[l4+13] = flags
	be.PutUint16(seg[l4+header.TCPChecksumOff:], 0)
	pseudo += header.ProtoTCP + uint64(n-l4)
	be.PutUint16(seg[l4+header.TCPChecksumOff:], ^header.Fold64(header.Sum64(seg[l4:], pseudo)))
	return n
}
