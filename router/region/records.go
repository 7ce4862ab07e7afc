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
	o := putHead(b, l.Proto, &l.TCP, l.Client, l.Server, l.Owner)
	l.ClientTuple.put(b[o:])
	l.ServerTuple.put(b[o+tupleLen:])
	putTail(b[o+2*tupleLen:], l.NATPort, l.ClosedAt)
}

func (l *Link) decode(b []byte) error {
	if !isZero(b[linkLen:]) {
		return errTail
	}
	o, err := getHead(b, &l.Proto, &l.TCP, &l.Client, &l.Server, &l.Owner, header.ProtoICMP)
	if err != nil {
		return err
	}
	l.ClientTuple.get(b[o:])
	l.ServerTuple.get(b[o+tupleLen:])
	l.NATPort, l.ClosedAt = getTail(b[o+2*tupleLen:])
	if err := checkTail(l.NATPort, l.ClosedAt, &l.TCP); err != nil {
		return err
	}
	if l.Proto == header.ProtoICMP && (l.ClientTuple.Sport != l.ClientTuple.Dport || l.ServerTuple.Sport != l.ServerTuple.Dport) {
		return errors.New("ICMP echo tuple with two IDs")
	}
	return nil
}

// putHead writes what both families' link records begin with: the protocol, the TCP state
// (of another protocol only opening or open), the domains and the owner. It returns where
// the rest goes.
func putHead(b []byte, proto uint8, tcp *tcpstate.Conn, client, server, owner Name) int {
	b[0] = proto
	if proto == header.ProtoTCP {
		tcp.PutBinary(b[1:])
	} else {
		b[1] = byte(tcp.State) // opening until the server side answered, then open
	}
	o := 1 + tcpstate.BinaryLen
	binary.LittleEndian.PutUint64(b[o:], uint64(client))
	binary.LittleEndian.PutUint64(b[o+8:], uint64(server))
	binary.LittleEndian.PutUint64(b[o+16:], uint64(owner))
	return o + 24
}

// getHead reads what putHead wrote; echo is the family's ICMP protocol number.
func getHead(b []byte, proto *uint8, tcp *tcpstate.Conn, client, server, owner *Name, echo uint8) (int, error) {
	*proto = b[0]
	if *proto != header.ProtoTCP && *proto != header.ProtoUDP && *proto != echo {
		return 0, fmt.Errorf("protocol %d", *proto)
	}
	if *proto == header.ProtoTCP {
		var ok bool
		if *tcp, ok = tcpstate.FromBinary(b[1:]); !ok {
			return 0, errors.New("TCP state no connection has")
		}
	} else {
		if b[1] > byte(tcpstate.Open) || !isZero(b[2:1+tcpstate.BinaryLen]) {
			return 0, errors.New("TCP state on a link that is not TCP")
		}
		*tcp = tcpstate.Conn{State: tcpstate.State(b[1])}
	}
	o := 1 + tcpstate.BinaryLen
	*client = Name(binary.LittleEndian.Uint64(b[o:]))
	*server = Name(binary.LittleEndian.Uint64(b[o+8:]))
	*owner = Name(binary.LittleEndian.Uint64(b[o+16:]))
	return o + 24, nil
}

// putTail and getTail write and read a link record's NAT port and closing time.
func putTail(b []byte, natPort uint16, closedAt int64) {
	binary.LittleEndian.PutUint16(b, natPort)
	binary.LittleEndian.PutUint64(b[2:], uint64(closedAt))
}

func getTail(b []byte) (uint16, int64) {
	return binary.LittleEndian.Uint16(b), int64(binary.LittleEndian.Uint64(b[2:]))
}

func checkTail(natPort uint16, closedAt int64, tcp *tcpstate.Conn) error {
	switch {
	case natPort != 0 && natPort < 49152:
		return fmt.Errorf("NAT port %d outside the dynamic range", natPort)
	case closedAt < 0 || closedAt != 0 && tcp.State != tcpstate.Closed:
		return errors.New("closing time of a link that is not closed")
	}
	return nil
}

// Tuple6 is an IPv6 link side's 4-tuple (ICMPv6 echo: the query ID as both ports).
type Tuple6 struct {
	Src, Dst     [16]byte
	Sport, Dport uint16
}

const tuple6Len = 36

// Link6 is an IPv6 link state. Two IPv6 tuples do not fit a slot beside the rest, and the
// server side's is the client side's reversed but for what NAT66 changed: ServerDst, the
// router's address at the server domain with NAT66 (else the client's address), and the
// NAT port or echo ID. The router checks the result against its config as for IPv4.
type Link6 struct {
	Proto          uint8
	TCP            tcpstate.Conn
	Client, Server Name
	Owner          Name
	ClientTuple    Tuple6
	ServerDst      [16]byte
	NATPort        uint16
	ClosedAt       int64
	Slot           int32
}

const link6Len = 1 + tcpstate.BinaryLen + 3*8 + tuple6Len + 16 + 2 + 8

func (l *Link6) encode(b []byte) {
	o := putHead(b, l.Proto, &l.TCP, l.Client, l.Server, l.Owner)
	t := &l.ClientTuple
	copy(b[o:], t.Src[:])
	copy(b[o+16:], t.Dst[:])
	binary.LittleEndian.PutUint16(b[o+32:], t.Sport)
	binary.LittleEndian.PutUint16(b[o+34:], t.Dport)
	copy(b[o+tuple6Len:], l.ServerDst[:])
	putTail(b[o+tuple6Len+16:], l.NATPort, l.ClosedAt)
}

func (l *Link6) decode(b []byte) error {
	if !isZero(b[link6Len:]) {
		return errTail
	}
	o, err := getHead(b, &l.Proto, &l.TCP, &l.Client, &l.Server, &l.Owner, header.ProtoICMPv6)
	if err != nil {
		return err
	}
	t := &l.ClientTuple
	copy(t.Src[:], b[o:])
	copy(t.Dst[:], b[o+16:])
	t.Sport = binary.LittleEndian.Uint16(b[o+32:])
	t.Dport = binary.LittleEndian.Uint16(b[o+34:])
	copy(l.ServerDst[:], b[o+tuple6Len:])
	l.NATPort, l.ClosedAt = getTail(b[o+tuple6Len+16:])
	if err := checkTail(l.NATPort, l.ClosedAt, &l.TCP); err != nil {
		return err
	}
	if l.Proto == header.ProtoICMPv6 && t.Sport != t.Dport {
		return errors.New("ICMPv6 echo tuple with two IDs")
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

// MaxRDNSS bounds the RDNSS servers a SLAAC record keeps; a router that learned more keeps
// the first.
const MaxRDNSS = 2

// SLAAC is the IPv6 config a domain took by SLAAC (interface_ipv6="slaac"): its address and
// prefix length (64, or 128 for a prefix that is not on-link), the router it follows, the
// ends (Unix nanoseconds) of the valid, preferred and router lifetimes, the RA's MTU (0:
// none) and RDNSS with its end. What DHCPv6 gave is not kept: a restarted router asks again.
type SLAAC struct {
	Domain                            Name
	Addr                              [16]byte
	PrefixBits                        uint8
	Gateway                           [16]byte
	HasGateway                        bool
	ValidEnd, PreferredEnd, RouterEnd int64
	MTU                               uint16
	RDNSS                             [][16]byte
	RDNSSEnd                          int64
	Slot                              int32
}

const slaacLen = 8 + 16 + 1 + 16 + 1 + 3*8 + 2 + 1 + 16*MaxRDNSS + 8

func (c *SLAAC) encode(b []byte) {
	binary.LittleEndian.PutUint64(b, uint64(c.Domain))
	copy(b[8:24], c.Addr[:])
	b[24] = c.PrefixBits
	copy(b[25:41], c.Gateway[:])
	if c.HasGateway {
		b[41] = 1
	}
	binary.LittleEndian.PutUint64(b[42:], uint64(c.ValidEnd))
	binary.LittleEndian.PutUint64(b[50:], uint64(c.PreferredEnd))
	binary.LittleEndian.PutUint64(b[58:], uint64(c.RouterEnd))
	binary.LittleEndian.PutUint16(b[66:], c.MTU)
	n := min(len(c.RDNSS), MaxRDNSS)
	b[68] = byte(n)
	for k := range n {
		copy(b[69+16*k:], c.RDNSS[k][:])
	}
	binary.LittleEndian.PutUint64(b[69+16*MaxRDNSS:], uint64(c.RDNSSEnd))
}

func (c *SLAAC) decode(b []byte) error {
	if !isZero(b[slaacLen:]) {
		return errTail
	}
	c.Domain = Name(binary.LittleEndian.Uint64(b))
	copy(c.Addr[:], b[8:24])
	c.PrefixBits = b[24]
	copy(c.Gateway[:], b[25:41])
	if b[41] > 1 {
		return fmt.Errorf("has gateway is %d", b[41])
	}
	c.HasGateway = b[41] == 1
	c.ValidEnd = int64(binary.LittleEndian.Uint64(b[42:]))
	c.PreferredEnd = int64(binary.LittleEndian.Uint64(b[50:]))
	c.RouterEnd = int64(binary.LittleEndian.Uint64(b[58:]))
	c.MTU = binary.LittleEndian.Uint16(b[66:])
	n := int(b[68])
	if n > MaxRDNSS {
		return fmt.Errorf("%d RDNSS servers, at most %d", n, MaxRDNSS)
	}
	c.RDNSS = nil
	for k := range n {
		c.RDNSS = append(c.RDNSS, [16]byte(b[69+16*k:]))
	}
	if !isZero(b[69+16*n : 69+16*MaxRDNSS]) {
		return errors.New("bytes after the RDNSS servers")
	}
	c.RDNSSEnd = int64(binary.LittleEndian.Uint64(b[69+16*MaxRDNSS:]))
	return nil
}

// Record is what a slot holds: a *Link, *Link6, *ARP, *Lease, *Client or *SLAAC.
type Record interface {
	kind() Kind
	encode(b []byte)
}

func (*Link) kind() Kind   { return KindLink }
func (*Link6) kind() Kind  { return KindLink6 }
func (*ARP) kind() Kind    { return KindARP }
func (*Lease) kind() Kind  { return KindLease }
func (*Client) kind() Kind { return KindClient }
func (*SLAAC) kind() Kind  { return KindSLAAC }

func (l *Link) addTo(c *Contents, s int32)    { l.Slot = s; c.Links = append(c.Links, *l) }
func (l *Link6) addTo(c *Contents, s int32)   { l.Slot = s; c.Links6 = append(c.Links6, *l) }
func (a *ARP) addTo(c *Contents, s int32)     { a.Slot = s; c.ARP = append(c.ARP, *a) }
func (l *Lease) addTo(c *Contents, s int32)   { l.Slot = s; c.Leases = append(c.Leases, *l) }
func (cl *Client) addTo(c *Contents, s int32) { cl.Slot = s; c.Clients = append(c.Clients, *cl) }
func (sl *SLAAC) addTo(c *Contents, s int32)  { sl.Slot = s; c.SLAAC = append(c.SLAAC, *sl) }

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
