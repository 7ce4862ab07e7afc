package header

import "encoding/binary"

// ARP operations.
const (
	ARPRequest = 1
	ARPReply   = 2
)

// ARPLen is the length of an ARP packet for IPv4 over Ethernet.
const ARPLen = 28

// ARP is a view of an ARP packet for IPv4 over Ethernet.
type ARP []byte

// NewARP returns the ARP view of b, or false unless b is IPv4-over-Ethernet ARP.
func NewARP(b []byte) (ARP, bool) {
	if len(b) < ARPLen {
		return nil, false
	}
	a := ARP(b[:ARPLen])
	if binary.BigEndian.Uint16(a[0:]) != 1 || binary.BigEndian.Uint16(a[2:]) != EtherTypeIPv4 || a[4] != 6 || a[5] != 4 {
		return nil, false
	}
	return a, true
}

func (a ARP) Op() uint16             { return binary.BigEndian.Uint16(a[6:]) }
func (a ARP) SenderMAC() (m MAC)     { copy(m[:], a[8:14]); return }
func (a ARP) SenderIP() (ip [4]byte) { copy(ip[:], a[14:18]); return }
func (a ARP) TargetMAC() (m MAC)     { copy(m[:], a[18:24]); return }
func (a ARP) TargetIP() (ip [4]byte) { copy(ip[:], a[24:28]); return }

// PutARP writes a whole ARP packet into b (at least ARPLen bytes).
func PutARP(b []byte, op uint16, sMAC MAC, sIP [4]byte, tMAC MAC, tIP [4]byte) {
	binary.BigEndian.PutUint16(b[0:], 1)
	binary.BigEndian.PutUint16(b[2:], EtherTypeIPv4)
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:], op)
	copy(b[8:14], sMAC[:])
	copy(b[14:18], sIP[:])
	copy(b[18:24], tMAC[:])
	copy(b[24:28], tIP[:])
}
