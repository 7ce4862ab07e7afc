// Package dhcplease takes a DHCP lease on another's behalf: the supervisor runs it on a pod's
// interface inside the pod's namespace, as CNI's dhcp plugin daemon does, so that a netns
// guest gets its address from nic_router's DHCP server. Client is RFC 2131's state machine
// and nothing else: it is handed the time and the replies and answers with what to send and
// what to configure, so tests drive it with a fake clock and no sockets. Runner is the same
// machine on a packet socket in the namespace, configuring the interface with `ip`.
package dhcplease

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
)

// Lease is what an ACK granted, as the attachment record keeps it: the address with the
// subnet's prefix, the default route (the router option; invalid without), the DNS servers,
// the server that granted it, and when to renew (T1), rebind (T2) and give it up.
type Lease struct {
	Address netip.Prefix `json:"address"`
	Gateway netip.Addr   `json:"gateway,omitzero"`
	DNS     []netip.Addr `json:"dns,omitempty"`
	Server  netip.Addr   `json:"server"`
	Renew   time.Time    `json:"renew"`
	Rebind  time.Time    `json:"rebind"`
	Expires time.Time    `json:"expires"`
}

// State is RFC 2131's client state (its figure 5), and Released after a DHCPRELEASE.
type State uint8

const (
	Init State = iota
	Selecting
	Requesting
	Rebooting
	Bound
	Renewing
	Rebinding
	Released
)

func (s State) String() string {
	return [...]string{"INIT", "SELECTING", "REQUESTING", "INIT-REBOOT", "BOUND", "RENEWING", "REBINDING", "RELEASED"}[s]
}

// Config is the client's identity and what it remembers.
type Config struct {
	MAC      header.MAC // chaddr: the interface's
	ClientID []byte     // option 61, as sent (type byte first); nil: none
	// Remembered is the lease a previous run of the supervisor held: while unexpired the
	// client starts in INIT-REBOOT and asks for its address again; expired, its address is
	// the one a DISCOVER suggests.
	Remembered *Lease
	Rand       *rand.Rand // xids and the retransmission jitter; nil: seeded at random
}

// Retransmission (RFC 2131 4.1): 4 s before the first, doubling up to 64 s, each randomized
// by ±1 s; a REQUEST is sent at most requestTries times before the client starts over, and
// while renewing or rebinding it waits half the time left, at least a minute.
const (
	firstBackoff   = 4 * time.Second
	maxBackoff     = 64 * time.Second
	requestTries   = 4
	rebootTries    = 2
	minRenewRetry  = 60 * time.Second
	paramsAsked    = "\x01\x03\x06\x0f\x33\x36\x3a\x3b" // mask, router, DNS, domain, lease, server, T1, T2
	optRenewalTime = 58
	optRebindTime  = 59
)

// Step is what an event asks of the caller: a message to send (a UDP payload from port 68
// to 67: broadcast, or to the server when To is valid, from From or 0.0.0.0), a lease to
// configure (new, or renewed with new times), an address to remove (lost: a NAK or the end
// of the lease), or why a packet was dropped.
type Step struct {
	Send    []byte
	To      netip.Addr
	From    netip.Addr
	Bound   *Lease
	Lost    *Lease
	Dropped string
}

// Client is one interface's lease; its methods are called from one goroutine.
type Client struct {
	cfg     Config
	rand    *rand.Rand
	state   State
	xid     uint32
	lease   Lease      // while Bound, Renewing or Rebinding
	offered netip.Addr // Requesting, Rebooting: the address asked for
	server  netip.Addr // Requesting: the server that offered it
	hint    netip.Addr // INIT: the address a DISCOVER suggests (option 50)
	next    time.Time  // the next retransmission or timer
	backoff time.Duration
	tries   int
}

// New returns a client in INIT; Start sends its first message.
func New(cfg Config) *Client {
	c := &Client{cfg: cfg, rand: cfg.Rand}
	if c.rand == nil {
		c.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return c
}

// State is the client's state.
func (c *Client) State() State { return c.state }

// Lease is the lease held, while there is one.
func (c *Client) Lease() (Lease, bool) {
	return c.lease, c.state == Bound || c.state == Renewing || c.state == Rebinding
}

// Next is when Tick has something to do: a retransmission or the lease's next time.
func (c *Client) Next() time.Time { return c.next }

// Start begins: INIT-REBOOT with an unexpired remembered lease, else DISCOVER.
func (c *Client) Start(now time.Time) Step {
	if r := c.cfg.Remembered; r != nil && r.Address.Addr().Is4() {
		if now.Before(r.Expires) {
			c.state, c.offered, c.xid = Rebooting, r.Address.Addr(), c.rand.Uint32()
			c.retry(now, true)
			return c.request()
		}
		c.hint = r.Address.Addr()
	}
	return c.discover(now)
}

// discover starts over (INIT -> SELECTING) with a new transaction.
func (c *Client) discover(now time.Time) Step {
	c.state, c.xid = Selecting, c.rand.Uint32()
	c.retry(now, true)
	w := c.message(header.DHCPDiscover, netip.Addr{})
	if c.hint.IsValid() {
		w.AddIPv4s(header.OptRequestedIP, c.hint.As4())
	}
	return Step{Send: c.end(w)}
}

// retry sets the next retransmission: 4 s at first, doubling to 64 s, ±1 s.
func (c *Client) retry(now time.Time, first bool) {
	if first {
		c.backoff, c.tries = firstBackoff, 0
	} else if c.backoff < maxBackoff {
		c.backoff *= 2
	}
	c.tries++
	jitter := time.Duration(c.rand.Int64N(int64(2*time.Second+1))) - time.Second
	c.next = now.Add(c.backoff + jitter)
}

// message starts a request from ciaddr with the options every one carries.
func (c *Client) message(typ uint8, ciaddr netip.Addr) *header.DHCPBuilder {
	var ci [4]byte
	if ciaddr.IsValid() {
		ci = ciaddr.As4()
	}
	w := header.NewDHCPMessage(1, c.xid, ci, [4]byte{}, [4]byte{}, c.cfg.MAC, false)
	w.Add(header.OptMessageType, typ)
	if c.cfg.ClientID != nil {
		w.Add(header.OptClientID, c.cfg.ClientID...)
	}
	return w
}

func (c *Client) end(w *header.DHCPBuilder) []byte {
	if w.B[dhcpType] != header.DHCPRelease {
		w.Add(header.OptParamList, []byte(paramsAsked)...)
	}
	return w.End()
}

// dhcpType is where message writes option 53's value: the fixed part, 53 and its length.
const dhcpType = 240 + 2

// request is the DHCPREQUEST of the state: SELECTING's names the offer and its server,
// INIT-REBOOT's the remembered address (broadcast); RENEWING's (to the server) and
// REBINDING's (broadcast) come from the address held.
func (c *Client) request() Step {
	switch c.state {
	case Renewing, Rebinding:
		s := Step{Send: c.end(c.message(header.DHCPRequest, c.lease.Address.Addr())), From: c.lease.Address.Addr()}
		if c.state == Renewing {
			s.To = c.lease.Server
		}
		return s
	}
	w := c.message(header.DHCPRequest, netip.Addr{})
	w.AddIPv4s(header.OptRequestedIP, c.offered.As4())
	if c.state == Requesting {
		w.AddIPv4s(header.OptServerID, c.server.As4())
	}
	return Step{Send: c.end(w)}
}

// Tick does what is due at now: retransmit, renew at T1, rebind at T2, and at the lease's end
// remove the address and start over.
func (c *Client) Tick(now time.Time) Step {
	if c.next.IsZero() || now.Before(c.next) {
		return Step{}
	}
	switch c.state {
	case Selecting:
		c.retry(now, false)
		w := c.message(header.DHCPDiscover, netip.Addr{})
		if c.hint.IsValid() {
			w.AddIPv4s(header.OptRequestedIP, c.hint.As4())
		}
		return Step{Send: c.end(w)}
	case Requesting, Rebooting:
		if c.state == Requesting && c.tries >= requestTries || c.state == Rebooting && c.tries >= rebootTries {
			c.hint = c.offered
			return c.discover(now)
		}
		c.retry(now, false)
		return c.request()
	case Bound, Renewing, Rebinding:
		switch {
		case !now.Before(c.lease.Expires):
			lost := c.lease
			c.hint = lost.Address.Addr()
			s := c.discover(now)
			s.Lost = &lost
			return s
		case !now.Before(c.lease.Rebind) && c.state != Rebinding:
			c.state, c.xid = Rebinding, c.rand.Uint32()
		case c.state == Bound:
			c.state, c.xid = Renewing, c.rand.Uint32()
		}
		until := c.lease.Rebind
		if c.state == Rebinding {
			until = c.lease.Expires
		}
		c.next = now.Add(max(minRenewRetry, until.Sub(now)/2))
		if c.next.After(until) {
			c.next = until
		}
		return c.request()
	}
	return Step{}
}

// Release gives the lease back (DHCPRELEASE to its server) when one is held, and stops.
func (c *Client) Release() Step {
	l, held := c.Lease()
	c.state, c.next = Released, time.Time{}
	if !held {
		return Step{}
	}
	c.xid = c.rand.Uint32()
	w := c.message(header.DHCPRelease, l.Address.Addr())
	w.AddIPv4s(header.OptServerID, l.Server.As4())
	return Step{Send: c.end(w), To: l.Server, From: l.Address.Addr()}
}

// Receive takes a reply (the UDP payload to port 68): only one for this transaction and
// this chaddr counts, and a malformed one is dropped, the step naming the field.
func (c *Client) Receive(now time.Time, payload []byte) Step {
	drop := func(format string, args ...any) Step { return Step{Dropped: fmt.Sprintf(format, args...)} }
	msg, ok := header.NewDHCP(payload)
	switch {
	case !ok:
		return drop("DHCP message of %d bytes: shorter than 240 or no magic cookie", len(payload))
	case msg.Op() != 2:
		return drop("op %d: not a reply", msg.Op())
	case msg[1] != 1 || msg[2] != 6:
		return drop("htype %d, hlen %d: want Ethernet's 1 and 6", msg[1], msg[2])
	case c.state == Init || c.state == Released || c.state == Bound:
		return drop("%s: no reply awaited", c.state)
	case msg.XID() != c.xid:
		return drop("xid %#08x: not this transaction's (%#08x)", msg.XID(), c.xid)
	case msg.ClientMAC() != c.cfg.MAC:
		return drop("chaddr %s: not this interface's (%s)", msg.ClientMAC(), c.cfg.MAC)
	}
	typ := msg.MessageType()
	switch {
	case typ == 0:
		return drop("option 53 (message type) missing or malformed")
	case typ == header.DHCPOffer && c.state == Selecting:
		yi := netip.AddrFrom4(msg.YIAddr())
		server, ok := msg.OptionIPv4(header.OptServerID)
		switch {
		case !unicast(yi):
			return drop("OFFER yiaddr %s: not a unicast address", yi)
		case !ok || !unicast(netip.AddrFrom4(server)):
			return drop("OFFER option 54 (server identifier) missing or not a unicast address")
		}
		c.state, c.offered, c.server = Requesting, yi, netip.AddrFrom4(server)
		c.retry(now, true)
		return c.request()
	case typ == header.DHCPAck && (c.state == Requesting || c.state == Rebooting || c.state == Renewing || c.state == Rebinding):
		l, why := leaseOf(now, msg)
		if why != "" {
			return drop("ACK %s", why)
		}
		if !l.Server.IsValid() {
			l.Server = c.server
			if c.state == Renewing || c.state == Rebinding {
				l.Server = c.lease.Server
			}
		}
		s := Step{Bound: &l}
		if old, held := c.Lease(); held && old.Address != l.Address {
			s.Lost = &old
		}
		c.state, c.lease, c.hint, c.next = Bound, l, netip.Addr{}, l.Renew
		return s
	case typ == header.DHCPNak && c.state != Selecting:
		// The address is still the one to suggest: nic_router answers an INIT-REBOOT it has no
		// record of (its restart lost its leases) with a NAK, and offers the suggested
		// address when it is free.
		old, held := c.Lease()
		c.hint = c.offered
		if held {
			c.hint = old.Address.Addr()
		}
		s := c.discover(now)
		if held {
			s.Lost = &old
		}
		return s
	}
	return drop("message type %d unexpected in %s", typ, c.state)
}

// leaseOf reads an ACK's lease, or names the field that makes it unusable.
func leaseOf(now time.Time, msg header.DHCP) (Lease, string) {
	yi := netip.AddrFrom4(msg.YIAddr())
	mask, ok := msg.OptionIPv4(header.OptSubnetMask)
	if !ok {
		return Lease{}, "option 1 (subnet mask) missing"
	}
	bits := 0
	for m := uint32(mask[0])<<24 | uint32(mask[1])<<16 | uint32(mask[2])<<8 | uint32(mask[3]); m&(1<<31) != 0; m <<= 1 {
		bits++
	}
	if bits == 0 || bits > 30 || netmask(bits) != mask {
		return Lease{}, fmt.Sprintf("option 1 (subnet mask) %d.%d.%d.%d: want a contiguous mask of 1 to 30 bits", mask[0], mask[1], mask[2], mask[3])
	}
	p := netip.PrefixFrom(yi, bits)
	if !unicast(yi) || yi == p.Masked().Addr() || yi == broadcastOf(p) {
		return Lease{}, fmt.Sprintf("yiaddr %s: not a host address of %s", yi, p.Masked())
	}
	secs, ok := msg.OptionUint32(header.OptLeaseTime)
	if !ok || secs == 0 {
		return Lease{}, "option 51 (lease time) missing or 0"
	}
	lease := time.Duration(secs) * time.Second
	t1, t2 := lease/2, lease*7/8
	if v, ok := msg.OptionUint32(optRenewalTime); ok {
		t1 = time.Duration(v) * time.Second
	}
	if v, ok := msg.OptionUint32(optRebindTime); ok {
		t2 = time.Duration(v) * time.Second
	}
	if t2 > lease || t2 <= 0 {
		t2 = lease * 7 / 8
	}
	if t1 > t2 || t1 <= 0 {
		t1 = min(lease/2, t2)
	}
	l := Lease{Address: p, Renew: now.Add(t1), Rebind: now.Add(t2), Expires: now.Add(lease)}
	if g, ok := msg.OptionIPv4(header.OptRouter); ok && p.Masked().Contains(netip.AddrFrom4(g)) && netip.AddrFrom4(g) != yi {
		l.Gateway = netip.AddrFrom4(g)
	}
	for _, a := range msg.OptionIPv4s(header.OptDNSServer) {
		l.DNS = append(l.DNS, netip.AddrFrom4(a))
	}
	if s, ok := msg.OptionIPv4(header.OptServerID); ok && unicast(netip.AddrFrom4(s)) {
		l.Server = netip.AddrFrom4(s)
	}
	return l, ""
}

func netmask(bits int) [4]byte {
	m := ^uint32(0) << (32 - bits)
	return [4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}
}

func broadcastOf(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	m := netmask(p.Bits())
	for i := range a {
		a[i] |= ^m[i]
	}
	return netip.AddrFrom4(a)
}

func unicast(a netip.Addr) bool {
	return a.Is4() && !a.IsUnspecified() && !a.IsMulticast() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}
