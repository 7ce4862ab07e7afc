package region

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/tcpstate"
)

// Name is what a record keeps of a domain name or a session label: a 64-bit hash (FNV-1a), so
// that a record has a fixed size. A restarted router matches it against its config's domains
// and its new sessions' labels.
type Name uint64

// NameOf is s's Name.
func NameOf(s string) Name {
	h := fnv.New64a()
	h.Write([]byte(s))
	return Name(h.Sum64())
}

// Tuple is a link side's 4-tuple (ICMP echo: the query ID as both ports).
type Tuple struct {
	Src, Dst     [4]byte
	Sport, Dport uint16
}

const tupleLen = 12

func (t *Tuple) put(b []byte) {
	copy(b[0:4], t.Src[:])
	copy(b[4:8], t.Dst[:])
	binary.LittleEndian.PutUint16(b[8:], t.Sport)
	binary.LittleEndian.PutUint16(b[10:], t.Dport)
}

func (t *Tuple) get(b []byte) {
	copy(t.Src[:], b[0:4])
	copy(t.Dst[:], b[4:8])
	t.Sport = binary.LittleEndian.Uint16(b[8:])
	t.Dport = binary.LittleEndian.Uint16(b[10:])
}

// Link is a link state: its protocol and TCP state, the client side's domain and tuple, the
// server side's, the session that opened it and the NAT port it holds at the server side (0:
// none). ClosedAt (Unix nanoseconds) is when a TCP link closed, for its 2 MSL.
type Link struct {
	Proto          uint8
	TCP            tcpstate.Conn
	Client, Server Name // domains
	Owner          Name // session label
	ClientTuple    Tuple
	ServerTuple    Tuple
	NATPort        uint16
	ClosedAt       int64
	Slot           int32 // where Open found it
}

const linkLen = 1 + tcpstate.BinaryLen + 3*8 + 2*tupleLen + 2 + 8

func (l *Link) encode(b []byte) {
	b[0] = l.Proto
	if l.Proto == header.ProtoTCP {
		l.TCP.PutBinary(b[1:])
	} else {
		b[1] = byte(l.TCP.State) // opening until the server side answered, then open
	}
	o := 1 + tcpstate.BinaryLen
	binary.LittleEndian.PutUint64(b[o:], uint64(l.Client))
	binary.LittleEndian.PutUint64(b[o+8:], uint64(l.Server))
	binary.LittleEndian.PutUint64(b[o+16:], uint64(l.Owner))
	l.ClientTuple.put(b[o+24:])
	l.ServerTuple.put(b[o+24+tupleLen:])
	o += 24 + 2*tupleLen
	binary.LittleEndian.PutUint16(b[o:], l.NATPort)
	binary.LittleEndian.PutUint64(b[o+2:], uint64(l.ClosedAt))
}

func (l *Link) decode(b []byte) error {
	if !isZero(b[linkLen:]) {
		return errTail
	}
	l.Proto = b[0]
	if l.Proto == header.ProtoTCP {
		var ok bool
		if l.TCP, ok = tcpstate.FromBinary(b[1:]); !ok {
			return errors.New("TCP state no connection has")
		}
	} else {
		if b[1] > byte(tcpstate.Open) || !isZero(b[2:1+tcpstate.BinaryLen]) {
			return errors.New("TCP state on a link that is not TCP")
		}
		l.TCP.State = tcpstate.State(b[1])
	}
	o := 1 + tcpstate.BinaryLen
	l.Client = Name(binary.LittleEndian.Uint64(b[o:]))
	l.Server = Name(binary.LittleEndian.Uint64(b[o+8:]))
	l.Owner = Name(binary.LittleEndian.Uint64(b[o+16:]))
	l.ClientTuple.get(b[o+24:])
	l.ServerTuple.get(b[o+24+tupleLen:])
	o += 24 + 2*tupleLen
	l.NATPort = binary.LittleEndian.Uint16(b[o:])
	l.ClosedAt = int64(binary.LittleEndian.Uint64(b[o+2:]))
	switch {
	case l.Proto != header.ProtoTCP && l.Proto != header.ProtoUDP && l.Proto != header.ProtoICMP:
		return fmt.Errorf("protocol %d", l.Proto)
	case l.NATPort != 0 && l.NATPort < 49152:
		return fmt.Errorf("NAT port %d outside the dynamic range", l.NATPort)
	case l.ClosedAt < 0 || l.ClosedAt != 0 && l.TCP.State != tcpstate.Closed:
		return errors.New("closing time of a link that is not closed")
	case l.Proto == header.ProtoICMP && (l.ClientTuple.Sport != l.ClientTuple.Dport || l.ServerTuple.Sport != l.ServerTuple.Dport):
		return errors.New("ICMP echo tuple with two IDs")
	}
	return nil
}

var errTail = errors.New("bytes after the record")

// ARP is an ARP cache entry of a domain.
type ARP struct {
	Domain Name
	IP     [4]byte
	MAC    header.MAC
	Slot   int32
}

const arpLen = 8 + 4 + 6

func (a *ARP) encode(b []byte) {
	binary.LittleEndian.PutUint64(b, uint64(a.Domain))
	copy(b[8:12], a.IP[:])
	copy(b[12:18], a.MAC[:])
}

func (a *ARP) decode(b []byte) error {
	if !isZero(b[arpLen:]) {
		return errTail
	}
	a.Domain = Name(binary.LittleEndian.Uint64(b))
	copy(a.IP[:], b[8:12])
	copy(a.MAC[:], b[12:18])
	return nil
}

// Lease is an address a domain's DHCP server gave (or offered, Bound false) to MAC, through
// the session Owner, until Deadline (Unix nanoseconds).
type Lease struct {
	Domain   Name
	Owner    Name
	MAC      header.MAC
	IP       [4]byte
	Bound    bool
	Deadline int64
	Slot     int32
}

const leaseLen = 8 + 8 + 6 + 4 + 1 + 8

func (l *Lease) encode(b []byte) {
	binary.LittleEndian.PutUint64(b, uint64(l.Domain))
	binary.LittleEndian.PutUint64(b[8:], uint64(l.Owner))
	copy(b[16:22], l.MAC[:])
	copy(b[22:26], l.IP[:])
	if l.Bound {
		b[26] = 1
	}
	binary.LittleEndian.PutUint64(b[27:], uint64(l.Deadline))
}

func (l *Lease) decode(b []byte) error {
	if !isZero(b[leaseLen:]) {
		return errTail
	}
	l.Domain = Name(binary.LittleEndian.Uint64(b))
	l.Owner = Name(binary.LittleEndian.Uint64(b[8:]))
	copy(l.MAC[:], b[16:22])
	copy(l.IP[:], b[22:26])
	if b[26] > 1 {
		return fmt.Errorf("bound is %d", b[26])
	}
	l.Bound = b[26] == 1
	l.Deadline = int64(binary.LittleEndian.Uint64(b[27:]))
	return nil
}

// MaxDNSServers and MaxDNSDomain bound what a Client record keeps of a lease's DNS config; a
// router whose lease has more keeps no record (it asks again after a restart).
const (
	MaxDNSServers = 4
	MaxDNSDomain  = 48
)

// Client is the DHCP client of a domain: its state (the router's numbering), the exchange it
// is in, its timers (Unix nanoseconds) and, once bound, the IPv4 config of its lease.
type Client struct {
	Domain          Name
	State           uint8
	XID             uint32
	Offered, Server [4]byte
	Deadline        int64
	LeaseEnd        int64
	Addr            [4]byte
	PrefixBits      uint8
	Gateway         [4]byte
	HasGateway      bool
	DNS             [][4]byte
	DNSDomain       string
	Slot            int32
}

const clientLen = 8 + 1 + 4 + 4 + 4 + 8 + 8 + 4 + 1 + 4 + 1 + 1 + 4*MaxDNSServers + 1 + MaxDNSDomain

// Fits reports whether c's DNS config fits a record.
func (c *Client) Fits() bool { return len(c.DNS) <= MaxDNSServers && len(c.DNSDomain) <= MaxDNSDomain }

func (c *Client) encode(b []byte) {
	binary.LittleEndian.PutUint64(b, uint64(c.Domain))
	b[8] = c.State
	binary.LittleEndian.PutUint32(b[9:], c.XID)
	copy(b[13:17], c.Offered[:])
	copy(b[17:21], c.Server[:])
	binary.LittleEndian.PutUint64(b[21:], uint64(c.Deadline))
	binary.LittleEndian.PutUint64(b[29:], uint64(c.LeaseEnd))
	copy(b[37:41], c.Addr[:])
	b[41] = c.PrefixBits
	copy(b[42:46], c.Gateway[:])
	if c.HasGateway {
		b[46] = 1
	}
	b[47] = byte(len(c.DNS))
	for k, a := range c.DNS {
		copy(b[48+4*k:], a[:])
	}
	o := 48 + 4*MaxDNSServers
	b[o] = byte(len(c.DNSDomain))
	copy(b[o+1:], c.DNSDomain)
}

func (c *Client) decode(b []byte) error {
	if !isZero(b[clientLen:]) {
		return errTail
	}
	c.Domain = Name(binary.LittleEndian.Uint64(b))
	c.State = b[8]
	c.XID = binary.LittleEndian.Uint32(b[9:])
	copy(c.Offered[:], b[13:17])
	copy(c.Server[:], b[17:21])
	c.Deadline = int64(binary.LittleEndian.Uint64(b[21:]))
	c.LeaseEnd = int64(binary.LittleEndian.Uint64(b[29:]))
	copy(c.Addr[:], b[37:41])
	c.PrefixBits = b[41]
	copy(c.Gateway[:], b[42:46])
	if b[46] > 1 {
		return fmt.Errorf("has gateway is %d", b[46])
	}
	c.HasGateway = b[46] == 1
	n := int(b[47])
	if n > MaxDNSServers {
		return fmt.Errorf("%d DNS servers, at most %d", n, MaxDNSServers)
	}
	c.DNS = nil
	for k := range n {
		c.DNS = append(c.DNS, [4]byte(b[48+4*k:52+4*k]))
	}
	if !isZero(b[48+4*n : 48+4*MaxDNSServers]) {
		return errors.New("bytes after the DNS servers")
	}
	o := 48 + 4*MaxDNSServers
	m := int(b[o])
	if m > MaxDNSDomain {
		return fmt.Errorf("DNS domain of %d bytes, at most %d", m, MaxDNSDomain)
	}
	c.DNSDomain = string(b[o+1 : o+1+m])
	if !isZero(b[o+1+m : o+1+MaxDNSDomain]) {
		return errors.New("bytes after the DNS domain")
	}
	return nil
}

// Record is what a slot holds: a *Link, *ARP, *Lease or *Client.
type Record interface {
	kind() Kind
	encode(b []byte)
}

func (*Link) kind() Kind   { return KindLink }
func (*ARP) kind() Kind    { return KindARP }
func (*Lease) kind() Kind  { return KindLease }
func (*Client) kind() Kind { return KindClient }

func (l *Link) addTo(c *Contents, s int32)    { l.Slot = s; c.Links = append(c.Links, *l) }
func (a *ARP) addTo(c *Contents, s int32)     { a.Slot = s; c.ARP = append(c.ARP, *a) }
func (l *Lease) addTo(c *Contents, s int32)   { l.Slot = s; c.Leases = append(c.Leases, *l) }
func (cl *Client) addTo(c *Contents, s int32) { cl.Slot = s; c.Clients = append(c.Clients, *cl) }

// Put writes rec into slot s (None: a free one) and returns the slot, None when the region is
// full. A Client must fit (Fits).
func (r *Region) Put(s int32, rec Record) int32 {
	b, s, ok := r.begin(s, rec.kind())
	if ok {
		rec.encode(b)
		r.commit(s)
	}
	return s
}

// Keep frees every slot in use for which keep is false (a reconfiguration's leftovers).
func (r *Region) Keep(keep func(s int32) bool) {
	for s := int32(1); s <= r.slots; s++ {
		if r.used[s] && !keep(s) {
			r.Free(s)
		}
	}
}
