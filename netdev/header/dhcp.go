package header

import "encoding/binary"

// DHCP ports, message types and the options the router's server and client, nic_perf's
// server and client and the guests' client read or write.
const (
	DHCPServerPort = 67
	DHCPClientPort = 68

	DHCPDiscover = 1
	DHCPOffer    = 2
	DHCPRequest  = 3
	DHCPDecline  = 4
	DHCPAck      = 5
	DHCPNak      = 6
	DHCPRelease  = 7
	DHCPInform   = 8

	OptSubnetMask     = 1
	OptRouter         = 3
	OptDNSServer      = 6
	OptDomainName     = 15
	OptBroadcast      = 28
	OptRequestedIP    = 50
	OptLeaseTime      = 51
	OptMessageType    = 53
	OptServerID       = 54
	OptParamList      = 55
	OptMaxMessageSize = 57
	OptClientID       = 61
	OptEnd            = 255
	OptPad            = 0
)

// BOOTP's fixed part (RFC 2131): op, htype, hlen, hops, xid, secs, flags, four addresses, the
// 16-byte chaddr, sname (64) and file (128), then the magic cookie and the options.
const (
	dhcpSiaddr      = 20
	dhcpChaddr      = 28
	dhcpSname       = 44
	dhcpFile        = 108
	dhcpMagicAt     = 236
	dhcpOptionsFrom = 240
)

var dhcpMagic = [4]byte{99, 130, 83, 99}

// DHCP is a view of a DHCP (BOOTP) message.
type DHCP []byte

// NewDHCP returns the view of the UDP payload b, or false when it is no DHCP message.
func NewDHCP(b []byte) (DHCP, bool) {
	if len(b) < dhcpOptionsFrom || [4]byte(b[dhcpMagicAt:dhcpOptionsFrom]) != dhcpMagic {
		return nil, false
	}
	return DHCP(b), true
}

func (d DHCP) Op() uint8           { return d[0] }
func (d DHCP) XID() uint32         { return binary.BigEndian.Uint32(d[4:]) }
func (d DHCP) CIAddr() (a [4]byte) { copy(a[:], d[12:16]); return }
func (d DHCP) YIAddr() (a [4]byte) { copy(a[:], d[16:20]); return }
func (d DHCP) SIAddr() (a [4]byte) { copy(a[:], d[dhcpSiaddr:]); return }
func (d DHCP) ClientMAC() (m MAC)  { copy(m[:], d[dhcpChaddr:]); return }

// Option returns the value of the first option code, or false. A malformed option list ends
// the search.
func (d DHCP) Option(code uint8) ([]byte, bool) {
	o := d[dhcpOptionsFrom:]
	for len(o) > 0 {
		c := o[0]
		if c == OptEnd {
			break
		}
		if c == OptPad {
			o = o[1:]
			continue
		}
		if len(o) < 2 || len(o) < 2+int(o[1]) {
			break
		}
		if c == code {
			return o[2 : 2+int(o[1])], true
		}
		o = o[2+int(o[1]):]
	}
	return nil, false
}

// MessageType is option 53, or 0.
func (d DHCP) MessageType() uint8 {
	if v, ok := d.Option(OptMessageType); ok && len(v) == 1 {
		return v[0]
	}
	return 0
}

// OptionIPv4 returns the first address of an address option.
func (d DHCP) OptionIPv4(code uint8) ([4]byte, bool) {
	if v, ok := d.Option(code); ok && len(v) >= 4 {
		return [4]byte(v[:4]), true
	}
	return [4]byte{}, false
}

// OptionUint32 returns a 4-byte number option (a lease time).
func (d DHCP) OptionUint32(code uint8) (uint32, bool) {
	if v, ok := d.Option(code); ok && len(v) == 4 {
		return binary.BigEndian.Uint32(v), true
	}
	return 0, false
}

// OptionIPv4s returns every address of an address-list option (such as 6, DNS servers).
func (d DHCP) OptionIPv4s(code uint8) [][4]byte {
	v, _ := d.Option(code)
	var out [][4]byte
	for ; len(v) >= 4; v = v[4:] {
		out = append(out, [4]byte(v[:4]))
	}
	return out
}

// DHCPBuilder writes a DHCP message: the fixed part first, then options in call order.
type DHCPBuilder struct{ B []byte }

// NewDHCPMessage starts a message with the fixed fields set.
func NewDHCPMessage(op uint8, xid uint32, ciaddr, yiaddr, siaddr [4]byte, chaddr MAC, broadcast bool) *DHCPBuilder {
	b := make([]byte, dhcpOptionsFrom, 548)
	b[0], b[1], b[2] = op, 1, 6
	binary.BigEndian.PutUint32(b[4:], xid)
	if broadcast {
		b[10] = 0x80
	}
	copy(b[12:], ciaddr[:])
	copy(b[16:], yiaddr[:])
	copy(b[dhcpSiaddr:], siaddr[:])
	copy(b[dhcpChaddr:], chaddr[:])
	copy(b[dhcpMagicAt:], dhcpMagic[:])
	return &DHCPBuilder{B: b}
}

// Add appends option code with value v (at most 255 bytes; longer values are cut).
func (w *DHCPBuilder) Add(code uint8, v ...byte) {
	if len(v) > 255 {
		v = v[:255]
	}
	w.B = append(w.B, code, byte(len(v)))
	w.B = append(w.B, v...)
}

// AddIPv4s appends an address-list option.
func (w *DHCPBuilder) AddIPv4s(code uint8, as ...[4]byte) {
	v := make([]byte, 0, 4*len(as))
	for _, a := range as {
		v = append(v, a[:]...)
	}
	w.Add(code, v...)
}

// AddUint32 appends a 4-byte number option (a lease time).
func (w *DHCPBuilder) AddUint32(code uint8, x uint32) {
	w.Add(code, byte(x>>24), byte(x>>16), byte(x>>8), byte(x))
}

// End appends the end option and pads to the 300-byte BOOTP minimum.
func (w *DHCPBuilder) End() []byte {
	w.B = append(w.B, OptEnd)
	for len(w.B) < 300 {
		w.B = append(w.B, 0)
	}
	return w.B
}
