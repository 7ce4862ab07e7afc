package header

import (
	"encoding/binary"
	"errors"
)

// NDP is a view of a Neighbor Discovery message (RFC 4861 §4): an ICMPv6 message of type
// NDPRouterSolicit to NDPRedirect whose fixed part NewNDP checked. Each accessor belongs to
// the types whose fixed part has the field; options follow the fixed part.
type NDP []byte

// NDP flags: an RA's managed and other configuration (M, O), an NA's router, solicited and
// override (R, S, O), a prefix information option's on-link and autonomous (L, A).
const (
	RAManaged  = 0x80
	RAOther    = 0x40
	NARouter   = 0x80
	NASolicit  = 0x40
	NAOverride = 0x20
	PrefixL    = 0x80
	PrefixA    = 0x40
)

// Where each NDP message's options start: the length of its fixed part (RFC 4861 §4.1-4.5).
const (
	rsLen       = 8
	raLen       = 16
	nsLen       = 24
	naLen       = 24
	redirectLen = 40
)

func ndpFixedLen(typ uint8) int {
	switch typ {
	case NDPRouterSolicit:
		return rsLen
	case NDPRouterAdvert:
		return raLen
	case NDPNeighborSolicit:
		return nsLen
	case NDPNeighborAdvert:
		return naLen
	case NDPRedirect:
		return redirectLen
	}
	return 0
}

// NewNDP returns the NDP view of m, or false when m is no NDP message or shorter than its
// type's fixed part.
func NewNDP(m ICMPv6) (NDP, bool) {
	if len(m) < 1 {
		return nil, false
	}
	n := ndpFixedLen(m[0])
	if n == 0 || len(m) < n {
		return nil, false
	}
	return NDP(m), true
}

func (n NDP) Type() uint8 { return n[0] }

// Router advertisement fields.
func (n NDP) CurHopLimit() uint8     { return n[4] }
func (n NDP) RAFlags() uint8         { return n[5] }
func (n NDP) RouterLifetime() uint16 { return binary.BigEndian.Uint16(n[6:]) }
func (n NDP) ReachableTime() uint32  { return binary.BigEndian.Uint32(n[8:]) }
func (n NDP) RetransTimer() uint32   { return binary.BigEndian.Uint32(n[12:]) }

// NAFlags are a neighbor advertisement's R, S and O flags.
func (n NDP) NAFlags() uint8 { return n[4] }

// Target is the target address of a neighbor solicitation or advertisement or a redirect.
func (n NDP) Target() (a [16]byte) { copy(a[:], n[8:24]); return }

// RedirectDst is a redirect's destination address.
func (n NDP) RedirectDst() (a [16]byte) { copy(a[:], n[24:40]); return }

// Options are the options after the fixed part.
func (n NDP) Options() NDPOptions { return NDPOptions(n[ndpFixedLen(n[0]):]) }

// NDP option types (RFC 4861 §4.6, RFC 8106).
const (
	NDPOptSourceLinkAddr = 1
	NDPOptTargetLinkAddr = 2
	NDPOptPrefixInfo     = 3
	NDPOptRedirected     = 4
	NDPOptMTU            = 5
	NDPOptRDNSS          = 25
)

// NDPOptions is the option list of an NDP message: type, length in units of 8 bytes (the
// type and length bytes included), value.
type NDPOptions []byte

// NDPOption is one option, type and length bytes included.
type NDPOption []byte

func (o NDPOption) Type() uint8 { return o[0] }

// Next splits off the first option, or returns false when it has a length of 0 (which
// RFC 4861 §4.6 has the whole packet dropped for) or runs past the list.
func (l NDPOptions) Next() (NDPOption, NDPOptions, bool) {
	if len(l) < 2 || l[1] == 0 || int(l[1])*8 > len(l) {
		return nil, nil, false
	}
	n := int(l[1]) * 8
	return NDPOption(l[:n]), l[n:], true
}

// Valid reports whether every option of l has a nonzero length and ends within l.
func (l NDPOptions) Valid() bool {
	for len(l) > 0 {
		var ok bool
		if _, l, ok = l.Next(); !ok {
			return false
		}
	}
	return true
}

// Find returns the first option of type typ, or false (also when l is not Valid before it).
func (l NDPOptions) Find(typ uint8) (NDPOption, bool) {
	for len(l) > 0 {
		o, rest, ok := l.Next()
		if !ok {
			break
		}
		if o.Type() == typ {
			return o, true
		}
		l = rest
	}
	return nil, false
}

// LinkAddr is the Ethernet address of a source or target link-layer address option.
func (o NDPOption) LinkAddr() (m MAC, ok bool) {
	if len(o) != 8 {
		return m, false
	}
	return MAC(o[2:8]), true
}

// NDPPrefix is a prefix information option (RFC 4861 §4.6.2): lifetimes in seconds,
// 0xffffffff for infinity.
type NDPPrefix struct {
	Len              uint8
	Flags            uint8 // PrefixL, PrefixA
	Valid, Preferred uint32
	Prefix           [16]byte
}

// Prefix reads a prefix information option.
func (o NDPOption) Prefix() (p NDPPrefix, ok bool) {
	if len(o) != 32 {
		return p, false
	}
	return NDPPrefix{Len: o[2], Flags: o[3], Valid: binary.BigEndian.Uint32(o[4:]),
		Preferred: binary.BigEndian.Uint32(o[8:]), Prefix: [16]byte(o[16:32])}, true
}

// MTU reads an MTU option.
func (o NDPOption) MTU() (uint32, bool) {
	if len(o) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint32(o[4:]), true
}

// RDNSS reads a recursive DNS server option (RFC 8106 §5.1): its lifetime in seconds and the
// number of addresses, each read with RDNSSAddr.
func (o NDPOption) RDNSS() (lifetime uint32, n int, ok bool) {
	if len(o) < 24 || (len(o)-8)%16 != 0 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(o[4:]), (len(o) - 8) / 16, true
}

// RDNSSAddr is the i-th address of an RDNSS option.
func (o NDPOption) RDNSSAddr(i int) [16]byte { return [16]byte(o[8+16*i:]) }

// The reasons CheckNDP gives.
var (
	errNDPChain    = errors.New("ndp: extension header chain faulty, fragmented or not ICMPv6")
	errNDPType     = errors.New("ndp: no NDP message, or shorter than its fixed part")
	errNDPHopLimit = errors.New("ndp: hop limit is not 255")
	errNDPCode     = errors.New("ndp: ICMP code is not 0")
	errNDPChecksum = errors.New("ndp: bad checksum")
	errNDPOptions  = errors.New("ndp: option of length 0 or past the message")
	errNDPSource   = errors.New("ndp: router message not from a link-local address")
	errNDPTarget   = errors.New("ndp: multicast target or destination")
	errNDPDAD      = errors.New("ndp: from :: with a source link-layer address option or to no solicited-node group")
	errNDPSolicit  = errors.New("ndp: solicited advertisement to a multicast address")
)

// CheckNDP returns why the NDP message of packet ip, whose chain c was walked, fails the
// validity checks of RFC 4861 (§6.1.1, 6.1.2, 7.1.1, 7.1.2, 8.1) a codec can make, or nil.
// It also refuses a fragmented message (RFC 6980). What needs a host's state (a redirect
// from the current first-hop router) is the caller's.
func CheckNDP(ip IPv6, c *IPv6Chain) error {
	if c.Drop != ChainOK || c.Frag.Is || c.Proto != ProtoICMPv6 || c.Offset > len(ip) {
		return errNDPChain
	}
	m := ICMPv6(ip[c.Offset:])
	n, ok := NewNDP(m)
	if !ok {
		return errNDPType
	}
	src, dst := ip.Src(), ip.Dst()
	switch {
	case ip.HopLimit() != 255:
		return errNDPHopLimit
	case m.Code() != 0:
		return errNDPCode
	case !m.ChecksumValid(src, dst):
		return errNDPChecksum
	case !n.Options().Valid():
		return errNDPOptions
	}
	_, sll := n.Options().Find(NDPOptSourceLinkAddr)
	switch n.Type() {
	case NDPRouterSolicit:
		if IsUnspecified6(src) && sll {
			return errNDPDAD
		}
	case NDPRouterAdvert:
		if !IsLinkLocal6(src) {
			return errNDPSource
		}
	case NDPNeighborSolicit:
		if IsMulticast6(n.Target()) {
			return errNDPTarget
		}
		if IsUnspecified6(src) && (sll || dst != SolicitedNode(dst)) {
			return errNDPDAD
		}
	case NDPNeighborAdvert:
		if IsMulticast6(n.Target()) {
			return errNDPTarget
		}
		if IsMulticast6(dst) && n.NAFlags()&NASolicit != 0 {
			return errNDPSolicit
		}
	case NDPRedirect:
		if !IsLinkLocal6(src) {
			return errNDPSource
		}
		if t := n.Target(); IsMulticast6(n.RedirectDst()) || !IsLinkLocal6(t) && t != n.RedirectDst() {
			return errNDPTarget
		}
	}
	return nil
}

// RAFields are the fixed fields of a router advertisement: lifetime in seconds, reachable
// time and retransmission timer in milliseconds, 0 for unspecified.
type RAFields struct {
	CurHopLimit uint8
	Flags       uint8 // RAManaged, RAOther
	Lifetime    uint16
	Reachable   uint32
	Retrans     uint32
}

// NDPBuilder writes an NDP message as a whole IPv6 packet (hop limit 255) into a buffer with
// room for it: the fixed part by a Start function, then options in call order, then Finish.
type NDPBuilder struct {
	b        []byte
	n        int
	src, dst [16]byte
}

func startNDP(b []byte, typ uint8, src, dst [16]byte) NDPBuilder {
	n := IPv6Len + ndpFixedLen(typ)
	clear(b[IPv6Len:n])
	b[IPv6Len] = typ
	return NDPBuilder{b: b, n: n, src: src, dst: dst}
}

// StartRS starts a router solicitation.
func StartRS(b []byte, src, dst [16]byte) NDPBuilder {
	return startNDP(b, NDPRouterSolicit, src, dst)
}

// StartRA starts a router advertisement.
func StartRA(b []byte, src, dst [16]byte, f RAFields) NDPBuilder {
	w := startNDP(b, NDPRouterAdvert, src, dst)
	m := b[IPv6Len:]
	m[4], m[5] = f.CurHopLimit, f.Flags
	binary.BigEndian.PutUint16(m[6:], f.Lifetime)
	binary.BigEndian.PutUint32(m[8:], f.Reachable)
	binary.BigEndian.PutUint32(m[12:], f.Retrans)
	return w
}

// StartNS starts a neighbor solicitation for target.
func StartNS(b []byte, src, dst, target [16]byte) NDPBuilder {
	w := startNDP(b, NDPNeighborSolicit, src, dst)
	copy(b[IPv6Len+8:], target[:])
	return w
}

// StartNA starts a neighbor advertisement for target with flags (NARouter, NASolicit,
// NAOverride).
func StartNA(b []byte, src, dst, target [16]byte, flags uint8) NDPBuilder {
	w := startNDP(b, NDPNeighborAdvert, src, dst)
	b[IPv6Len+4] = flags
	copy(b[IPv6Len+8:], target[:])
	return w
}

// option starts an option of typ and 8*units bytes, zeroed but for type and length.
func (w *NDPBuilder) option(typ uint8, units int) []byte {
	o := w.b[w.n : w.n+8*units]
	clear(o)
	o[0], o[1] = typ, uint8(units)
	w.n += len(o)
	return o
}

// LinkAddr adds a source or target link-layer address option (typ) with m.
func (w *NDPBuilder) LinkAddr(typ uint8, m MAC) { copy(w.option(typ, 1)[2:], m[:]) }

// Prefix adds a prefix information option.
func (w *NDPBuilder) Prefix(p NDPPrefix) {
	o := w.option(NDPOptPrefixInfo, 4)
	o[2], o[3] = p.Len, p.Flags
	binary.BigEndian.PutUint32(o[4:], p.Valid)
	binary.BigEndian.PutUint32(o[8:], p.Preferred)
	copy(o[16:], p.Prefix[:])
}

// MTU adds an MTU option.
func (w *NDPBuilder) MTU(mtu uint32) { binary.BigEndian.PutUint32(w.option(NDPOptMTU, 1)[4:], mtu) }

// RDNSS adds a recursive DNS server option with lifetime in seconds and at least one address.
func (w *NDPBuilder) RDNSS(lifetime uint32, addrs ...[16]byte) {
	o := w.option(NDPOptRDNSS, 1+2*len(addrs))
	binary.BigEndian.PutUint32(o[4:], lifetime)
	for i, a := range addrs {
		copy(o[8+16*i:], a[:])
	}
}

// Finish writes the IPv6 header and the checksum and returns the packet.
func (w *NDPBuilder) Finish() IPv6 {
	PutIPv6(w.b, w.n-IPv6Len, ProtoICMPv6, 255, w.src, w.dst)
	ICMPv6(w.b[IPv6Len:w.n]).UpdateChecksum(w.src, w.dst)
	return IPv6(w.b[:w.n])
}
