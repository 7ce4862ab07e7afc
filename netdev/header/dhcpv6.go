package header

import (
	"encoding/binary"
	"strings"
)

// DHCPv6 (RFC 8415) as far as a stateless client needs it (RFC 8415 6.1): the
// Information-Request and its Reply, with the options that carry DNS servers (RFC 3646).
const (
	DHCPv6ClientPort = 546
	DHCPv6ServerPort = 547

	DHCPv6Reply       = 7
	DHCPv6InfoRequest = 11

	DHCPv6OptClientID    = 1
	DHCPv6OptServerID    = 2
	DHCPv6OptORO         = 6
	DHCPv6OptElapsedTime = 8
	DHCPv6OptStatusCode  = 13
	DHCPv6OptDNSServers  = 23
	DHCPv6OptDomainList  = 24
	DHCPv6OptRefreshTime = 32
	DHCPv6OptInfMaxRT    = 83
)

// AllDHCPAgents is ff02::1:2, All_DHCP_Relay_Agents_and_Servers.
var AllDHCPAgents = [16]byte{0: 0xff, 1: 0x02, 13: 0x01, 15: 0x02}

// DHCPv6 is a view of a client/server message: type, 24-bit transaction ID, options.
type DHCPv6 []byte

// NewDHCPv6 returns the view of b, or false when b is shorter than the fixed part or an
// option runs past it.
func NewDHCPv6(b []byte) (DHCPv6, bool) {
	if len(b) < 4 {
		return nil, false
	}
	for o := b[4:]; len(o) > 0; {
		if len(o) < 4 || len(o) < 4+int(binary.BigEndian.Uint16(o[2:])) {
			return nil, false
		}
		o = o[4+int(binary.BigEndian.Uint16(o[2:])):]
	}
	return DHCPv6(b), true
}

func (m DHCPv6) Type() uint8 { return m[0] }
func (m DHCPv6) XID() uint32 { return uint32(m[1])<<16 | uint32(m[2])<<8 | uint32(m[3]) }

// Option returns the data of the first option code.
func (m DHCPv6) Option(code uint16) ([]byte, bool) {
	for o := m[4:]; len(o) >= 4; {
		n := 4 + int(binary.BigEndian.Uint16(o[2:]))
		if binary.BigEndian.Uint16(o) == code {
			return o[4:n], true
		}
		o = o[n:]
	}
	return nil, false
}

// DHCPv6Builder writes a message into a buffer large enough for it.
type DHCPv6Builder struct{ b []byte }

// StartDHCPv6 starts a message of typ with transaction ID xid (its low 24 bits) in b.
func StartDHCPv6(b []byte, typ uint8, xid uint32) DHCPv6Builder {
	b[0], b[1], b[2], b[3] = typ, byte(xid>>16), byte(xid>>8), byte(xid)
	return DHCPv6Builder{b: b[:4]}
}

// Add appends option code with the concatenation of data.
func (w *DHCPv6Builder) Add(code uint16, data ...[]byte) {
	n := 0
	for _, d := range data {
		n += len(d)
	}
	w.b = binary.BigEndian.AppendUint16(w.b, code)
	w.b = binary.BigEndian.AppendUint16(w.b, uint16(n))
	for _, d := range data {
		w.b = append(w.b, d...)
	}
}

// Bytes is the message.
func (w *DHCPv6Builder) Bytes() DHCPv6 { return DHCPv6(w.b) }

// DUIDLL is the DUID-LL (RFC 8415 11.4) of an Ethernet MAC: type 3, hardware type 1.
func DUIDLL(m MAC) []byte { return []byte{0, 3, 0, 1, m[0], m[1], m[2], m[3], m[4], m[5]} }

// DomainNames reads a list of uncompressed DNS names (RFC 1035 3.1), as option 24 has
// them; false when one runs past the data or is longer than 255 bytes.
func DomainNames(b []byte) ([]string, bool) {
	var out []string
	var name strings.Builder
	for len(b) > 0 {
		n := int(b[0])
		switch {
		case n == 0:
			if name.Len() > 0 {
				out = append(out, name.String())
			}
			name.Reset()
		case n > 63 || len(b) < 1+n || name.Len()+n > 254:
			return nil, false
		default:
			if name.Len() > 0 {
				name.WriteByte('.')
			}
			name.Write(b[1 : 1+n])
		}
		b = b[1+n:]
	}
	return out, name.Len() == 0
}
