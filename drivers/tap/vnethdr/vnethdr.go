// Package vnethdr converts between the virtio-net header Linux puts before each frame (TAP with
// IFF_VNET_HDR, AF_PACKET with PACKET_VNET_HDR) and netdev.Offload, and checks such
// metadata against the frame it describes: headers come from untrusted sources.
package vnethdr

import (
	"encoding/binary"

	"github.com/nicstack/nicstack/netdev"
)

// Len is the size of struct virtio_net_hdr (without num_buffers), the kernel's default.
const Len = 10

// Without TUNSETVNETLE / a virtio 1.0 device the kernel uses the legacy, host byte order.
var order = binary.NativeEndian

// Decode reads the header h (Len bytes) describing frame into o and fixes it up (see Fix). It
// reports false for a header that does not fit the frame.
func Decode(h, frame []byte, o *netdev.Offload) bool {
	*o = netdev.Offload{
		Flags:      h[0],
		GSOType:    h[1],
		HdrLen:     order.Uint16(h[2:]),
		GSOSize:    order.Uint16(h[4:]),
		CsumStart:  order.Uint16(h[6:]),
		CsumOffset: order.Uint16(h[8:]),
	}
	return Fix(frame, o)
}

// Encode writes o as a virtio-net header into h (Len bytes).
func Encode(h []byte, o *netdev.Offload) {
	h[0] = o.Flags
	h[1] = o.GSOType
	order.PutUint16(h[2:], o.HdrLen)
	order.PutUint16(h[4:], o.GSOSize)
	order.PutUint16(h[6:], o.CsumStart)
	order.PutUint16(h[8:], o.CsumOffset)
}

// Fix checks o against frame and reports whether it is usable: known flags and GSO type, the
// checksum field inside the frame, GSO only with a partial checksum and a segment size. It sets
// HdrLen to the real length of the headers for GSO frames (the kernel reports the length of the
// skb's linear part there, which is only a hint) and to 0 otherwise.
func Fix(frame []byte, o *netdev.Offload) bool {
	if o.Flags&^(netdev.OffloadNeedsCsum|netdev.OffloadDataValid) != 0 {
		return false
	}
	if o.Flags&netdev.OffloadNeedsCsum != 0 &&
		int(o.CsumStart)+int(o.CsumOffset)+2 > len(frame) {
		return false
	}
	gso := o.GSOType &^ netdev.GSOECN
	if gso == netdev.GSONone {
		if o.GSOType != netdev.GSONone {
			return false // ECN without GSO
		}
		o.HdrLen, o.GSOSize = 0, 0
		return true
	}
	if o.GSOSize == 0 || o.Flags&netdev.OffloadNeedsCsum == 0 {
		return false
	}
	var hdr int
	switch gso {
	case netdev.GSOTCPv4, netdev.GSOTCPv6:
		// The checksum starts at the TCP header; its data offset says how long the header is.
		if int(o.CsumStart)+20 > len(frame) {
			return false
		}
		doff := int(frame[int(o.CsumStart)+12]>>4) * 4
		if doff < 20 {
			return false
		}
		hdr = int(o.CsumStart) + doff
	case netdev.GSOUDP:
		hdr = int(o.CsumStart) + 8
	default:
		return false
	}
	if hdr > len(frame) {
		return false
	}
	o.HdrLen = uint16(hdr)
	return true
}
