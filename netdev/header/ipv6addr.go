package header

// The IPv6 addresses a host or router derives from its MAC and from other addresses: the
// interface identifier of SLAAC (modified EUI-64, RFC 4291 Appendix A), the link-local and
// SLAAC addresses built on it, the solicited-node multicast group NDP resolves through
// (RFC 4291 §2.7.1) and the Ethernet group of a multicast address (RFC 2464 §7).

// Well-known link-scope groups.
var (
	AllNodes   = [16]byte{0: 0xff, 1: 0x02, 15: 0x01} // ff02::1
	AllRouters = [16]byte{0: 0xff, 1: 0x02, 15: 0x02} // ff02::2
)

// EUI64 is the modified EUI-64 interface identifier of m: ff:fe in the middle and the
// universal/local bit inverted.
func EUI64(m MAC) [8]byte {
	return [8]byte{m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]}
}

// SLAACAddr is the address SLAAC forms from a /64 prefix (its first 8 bytes) and m.
func SLAACAddr(prefix [16]byte, m MAC) (a [16]byte) {
	copy(a[:8], prefix[:8])
	iid := EUI64(m)
	copy(a[8:], iid[:])
	return a
}

// LinkLocal is m's link-local address, fe80::/64 with m's interface identifier.
func LinkLocal(m MAC) [16]byte { return SLAACAddr([16]byte{0: 0xfe, 1: 0x80}, m) }

// SolicitedNode is the solicited-node group of a: ff02::1:ff and a's low 24 bits.
func SolicitedNode(a [16]byte) [16]byte {
	return [16]byte{0: 0xff, 1: 0x02, 11: 0x01, 12: 0xff, 13: a[13], 14: a[14], 15: a[15]}
}

// MulticastMAC is the Ethernet group an IPv6 multicast address is sent to: 33:33 and its low
// 32 bits.
func MulticastMAC(a [16]byte) MAC { return MAC{0x33, 0x33, a[12], a[13], a[14], a[15]} }

// IsMulticast6 reports whether a is an IPv6 multicast address (ff00::/8).
func IsMulticast6(a [16]byte) bool { return a[0] == 0xff }

// IsUnspecified6 reports whether a is ::, the source of a host that has no address yet.
func IsUnspecified6(a [16]byte) bool { return a == [16]byte{} }

// IsLinkLocal6 reports whether a is a link-local unicast address (fe80::/10).
func IsLinkLocal6(a [16]byte) bool { return a[0] == 0xfe && a[1]&0xc0 == 0x80 }
