// Package header holds the wire formats nicstack reads and writes: Ethernet, ARP, IPv4, TCP,
// UDP, ICMP and DHCP, IPv6 with its extension header chain, ICMPv6 and NDP, as views over the
// frame's bytes (nothing is copied or allocated; a view is made only after its length was
// checked, by the New* functions), the Internet checksum, the addresses IPv6 derives from a
// MAC, and the frame printer of Genode's packet log. It is the one codec the router, nic_perf,
// nic_dump, the guests and the drivers' offloads share; it is a leaf (standard library only)
// and not a protocol stack.
package header

import "encoding/binary"

// MAC is an Ethernet address.
type MAC [6]byte

// Broadcast is ff:ff:ff:ff:ff:ff.
var Broadcast = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// String is the address as Genode prints it: lower-case hex pairs joined by colons.
func (m MAC) String() string { return string(appendMAC(make([]byte, 0, 17), m)) }

// EtherTypes: the two the router handles, IPv6, and the VLAN tags (802.1Q, 802.1ad) a
// segmenter steps over.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
	EtherTypeIPv6 = 0x86dd
	EtherTypeVLAN = 0x8100
	EtherTypeQinQ = 0x88a8
)

// EthLen is the length of an Ethernet header without VLAN tag.
const EthLen = 14

// Eth is an Ethernet header view.
type Eth []byte

// NewEth returns the Ethernet view of frame, or false when the frame is too short.
func NewEth(frame []byte) (Eth, bool) {
	if len(frame) < EthLen {
		return nil, false
	}
	return Eth(frame), true
}

func (e Eth) Dst() (m MAC)     { copy(m[:], e[0:6]); return }
func (e Eth) Src() (m MAC)     { copy(m[:], e[6:12]); return }
func (e Eth) SetDst(m MAC)     { copy(e[0:6], m[:]) }
func (e Eth) SetSrc(m MAC)     { copy(e[6:12], m[:]) }
func (e Eth) Type() uint16     { return binary.BigEndian.Uint16(e[12:]) }
func (e Eth) SetType(t uint16) { binary.BigEndian.PutUint16(e[12:], t) }
func (e Eth) Payload() []byte  { return e[EthLen:] }
