package header

import "encoding/binary"

// IPv6 next header values: the extension headers the chain walker steps over, the two that
// end a chain unread, and ICMPv6 (TCP and UDP are IPv4's protocol numbers).
const (
	ProtoHopByHop = 0
	ProtoRouting  = 43
	ProtoFragment = 44
	ProtoESP      = 50
	ProtoAH       = 51
	ProtoICMPv6   = 58
	ProtoNoNext   = 59
	ProtoDstOpts  = 60
)

// ChainDrop is why a packet's extension header chain makes it one to drop; ChainOK is none.
type ChainDrop uint8

const (
	ChainOK                ChainDrop = iota
	ChainTruncated                   // a header runs past the packet
	ChainTooLong                     // a chain that ends past the first IPv6MinMTU bytes
	ChainHopByHopNotFirst            // hop-by-hop options anywhere but first (RFC 8200 §4.1)
	ChainRepeated                    // a header repeated where RFC 8200 §4.1 allows it once
	ChainUnknownNextHeader           // a next header value that is no header the walker knows
	ChainRoutingType0                // routing header type 0, deprecated by RFC 5095
)

var chainDropNames = [...]string{
	ChainOK:                "ok",
	ChainTruncated:         "truncated header",
	ChainTooLong:           "chain too long",
	ChainHopByHopNotFirst:  "hop-by-hop not first",
	ChainRepeated:          "header repeated",
	ChainUnknownNextHeader: "unknown next header",
	ChainRoutingType0:      "routing type 0",
}

func (d ChainDrop) String() string {
	if int(d) < len(chainDropNames) {
		return chainDropNames[d]
	}
	return "?"
}

// IPv6Ext is one extension header of a chain: its kind (the next header value that named
// it) and where it lies in the IPv6 packet.
type IPv6Ext struct {
	Type     uint8
	Off, Len int
}

// IPv6Frag is what a fragment header says. The router does not reassemble: it forwards
// fragments or drops them, and reads an upper-layer header only in a first fragment.
type IPv6Frag struct {
	Is     bool
	Offset int // of the fragment's data in the original packet, in bytes
	More   bool
	ID     uint32
}

// IPv6Chain walks the extension headers of an IPv6 packet (RFC 8200 §4) to the upper layer.
// When the walk ends, Proto and Offset are the upper layer's next header value and where its
// header starts (ESP and no next header end the chain unread; after a fragment header with a
// nonzero offset they name data, not a header), or Drop says why the packet is to be dropped
// and Pointer is the offset of the field at fault, a parameter problem's pointer (RFC 4443
// §3.4). It allocates nothing and reads only within the packet.
//
// What bounds a walk: a kind of header may occur once (destination options twice), so a
// chain the walker accepts has at most six headers, and it must end within the first
// IPv6MinMTU bytes, as RFC 7112 wants all of it in the first fragment. The walker knows no
// other extension header (mobility, HIP, shim6, experimental ones): those are unknown next
// headers, as is every upper layer but TCP, UDP and ICMPv6, which nic_router does not route.
type IPv6Chain struct {
	Proto   uint8
	Offset  int
	Frag    IPv6Frag
	Drop    ChainDrop
	Pointer int

	p       IPv6
	at      int   // where Proto was read
	seen    uint8 // a bit per header kind allowed once
	dstOpts int
	done    bool
}

// NewIPv6Chain starts a walk at the fixed header of p.
func NewIPv6Chain(p IPv6) IPv6Chain {
	return IPv6Chain{Proto: p.NextHeader(), Offset: IPv6Len, p: p, at: 6}
}

// WalkIPv6 walks all of p's chain.
func WalkIPv6(p IPv6) IPv6Chain {
	c := NewIPv6Chain(p)
	for {
		if _, ok := c.Next(); !ok {
			return c
		}
	}
}

// Next steps over the next extension header and returns it, or false when the chain has
// ended: at the upper layer, or at a fault in Drop.
func (c *IPv6Chain) Next() (IPv6Ext, bool) {
	if c.done || c.Drop != ChainOK || c.Frag.Offset != 0 {
		return IPv6Ext{}, false
	}
	var once uint8 // the kind's bit if it may occur once
	switch c.Proto {
	case ProtoHopByHop:
		if c.Offset != IPv6Len {
			return c.drop(ChainHopByHopNotFirst, c.at)
		}
		once = 1
	case ProtoRouting:
		once = 2
	case ProtoFragment:
		once = 4
	case ProtoAH:
		once = 8
	case ProtoDstOpts:
		// Once before a routing header and once before the upper layer.
		if c.dstOpts++; c.dstOpts > 2 {
			return c.drop(ChainRepeated, c.at)
		}
	case ProtoTCP, ProtoUDP, ProtoICMPv6, ProtoESP, ProtoNoNext:
		c.done = true
		return IPv6Ext{}, false
	default:
		return c.drop(ChainUnknownNextHeader, c.at)
	}
	if c.seen&once != 0 {
		return c.drop(ChainRepeated, c.at)
	}
	c.seen |= once
	h := c.p[c.Offset:]
	if len(h) < 2 { // next header and length; the rest is read once n bytes are there
		return c.drop(ChainTruncated, c.at)
	}
	var n int
	switch c.Proto {
	case ProtoFragment:
		n = 8
	case ProtoAH:
		n = (int(h[1]) + 2) * 4
	default:
		n = (int(h[1]) + 1) * 8
	}
	if n > len(h) {
		return c.drop(ChainTruncated, c.Offset+1)
	}
	if c.Offset+n > IPv6MinMTU {
		return c.drop(ChainTooLong, c.Offset+1)
	}
	switch c.Proto {
	case ProtoRouting:
		if h[2] == 0 {
			return c.drop(ChainRoutingType0, c.Offset+2)
		}
	case ProtoFragment:
		v := binary.BigEndian.Uint16(h[2:])
		c.Frag = IPv6Frag{Is: true, Offset: int(v &^ 7), More: v&1 != 0, ID: binary.BigEndian.Uint32(h[4:])}
	}
	e := IPv6Ext{Type: c.Proto, Off: c.Offset, Len: n}
	c.Proto, c.at = h[0], c.Offset
	c.Offset += n
	return e, true
}

func (c *IPv6Chain) drop(d ChainDrop, pointer int) (IPv6Ext, bool) {
	c.Drop, c.Pointer = d, pointer
	return IPv6Ext{}, false
}
