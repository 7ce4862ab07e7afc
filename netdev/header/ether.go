// Package header holds the wire formats nicstack reads and writes: Ethernet, ARP, IPv4, TCP,
// UDP, ICMP and DHCP, as views over the frame's bytes (nothing is copied or allocated; a view
// is made only after its length was checked, by the New* functions), the Internet checksum,
// and the frame printer of Genode's packet log. It is the one codec the router, nic_perf,
// nic_dump, the guests and the drivers' offloads share; it is a leaf (standard library only)
// and not a protocol stack.
package header

import "encoding/binary"

// MAC is an Ethernet address.
type MAC [6]byte

// Broadcast is ff:ff:ff:ff:ff:ff.
var Broadcast = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

func (m MAC) String() string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, 17)
	for i, x := range m {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, hex[x>>4], hex[x&15])
	}
	return string(b)
}

// EtherTypes the router knows.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
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
