package dhcplease

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/nicstack/nicstack/netdev/header"
)

var (
	mac    = header.MAC{2, 0, 0, 0, 0, 0x42}
	server = netip.MustParseAddr("10.0.2.1")
	t0     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// reply is a server's answer to req: OFFER or ACK of addr (a /24 through server, lease
// seconds), or NAK.
func reply(req []byte, typ uint8, addr string, lease uint32) []byte {
	m, _ := header.NewDHCP(req)
	yi := [4]byte{}
	if addr != "" {
		yi = netip.MustParseAddr(addr).As4()
	}
	w := header.NewDHCPMessage(2, m.XID(), [4]byte{}, yi, server.As4(), m.ClientMAC(), false)
	w.Add(header.OptMessageType, typ)
	w.AddIPv4s(header.OptServerID, server.As4())
	if typ != header.DHCPNak {
		w.AddUint32(header.OptLeaseTime, lease)
		w.AddIPv4s(header.OptSubnetMask, [4]byte{255, 255, 255, 0})
		w.AddIPv4s(header.OptRouter, server.As4())
		w.AddIPv4s(header.OptDNSServer, [4]byte{10, 0, 2, 53})
	}
	return w.End()
}

func newClient(remembered *Lease) *Client {
	return New(Config{MAC: mac, ClientID: []byte("\x00pod"), Remembered: remembered, Rand: rand.New(rand.NewPCG(1, 2))})
}

// msgOf reads a step's message, failing when there is none.
func msgOf(t *testing.T, s Step, typ uint8) header.DHCP {
	t.Helper()
	m, ok := header.NewDHCP(s.Send)
	if !ok || m.MessageType() != typ || m.Op() != 1 || m.ClientMAC() != mac {
		t.Fatalf("step %+v: want a DHCP message of type %d from %s", s, typ, mac)
	}
	if id, _ := m.Option(header.OptClientID); string(id) != "\x00pod" {
		t.Errorf("client id %q", id)
	}
	return m
}

// bind runs DISCOVER, OFFER, REQUEST, ACK of 10.0.2.100 for lease seconds.
func bind(t *testing.T, c *Client, lease uint32) Lease {
	t.Helper()
	d := msgOf(t, c.Start(t0), header.DHCPDiscover)
	s := c.Receive(t0, reply(d, header.DHCPOffer, "10.0.2.100", lease))
	r := msgOf(t, s, header.DHCPRequest)
	if r.XID() != d.XID() || s.To.IsValid() {
		t.Fatalf("REQUEST xid %#x (DISCOVER's %#x), to %v: want the same transaction, broadcast", r.XID(), d.XID(), s.To)
	}
	if a, _ := r.OptionIPv4(header.OptRequestedIP); a != [4]byte{10, 0, 2, 100} {
		t.Errorf("REQUEST option 50 %v", a)
	}
	if a, _ := r.OptionIPv4(header.OptServerID); a != server.As4() {
		t.Errorf("REQUEST option 54 %v", a)
	}
	s = c.Receive(t0, reply(r, header.DHCPAck, "10.0.2.100", lease))
	if s.Bound == nil || s.Lost != nil || c.State() != Bound {
		t.Fatalf("ACK: step %+v, state %s", s, c.State())
	}
	return *s.Bound
}

func TestExchangeRenewRebindExpire(t *testing.T) {
	c := newClient(nil)
	l := bind(t, c, 3600)
	want := Lease{Address: netip.MustParsePrefix("10.0.2.100/24"), Gateway: server, DNS: []netip.Addr{netip.MustParseAddr("10.0.2.53")},
		Server: server, Renew: t0.Add(1800 * time.Second), Rebind: t0.Add(3150 * time.Second), Expires: t0.Add(time.Hour)}
	if l.Address != want.Address || l.Gateway != want.Gateway || len(l.DNS) != 1 || l.DNS[0] != want.DNS[0] ||
		l.Server != want.Server || !l.Renew.Equal(want.Renew) || !l.Rebind.Equal(want.Rebind) || !l.Expires.Equal(want.Expires) {
		t.Fatalf("lease %+v, want %+v", l, want)
	}
	if s := c.Tick(l.Renew.Add(-time.Second)); s.Send != nil || !c.Next().Equal(l.Renew) {
		t.Fatalf("before T1: %+v, next %v", s, c.Next())
	}
	// T1: RENEWING, unicast to the server from the address held.
	s := c.Tick(l.Renew)
	r := msgOf(t, s, header.DHCPRequest)
	if c.State() != Renewing || s.To != server || s.From != l.Address.Addr() || r.CIAddr() != l.Address.Addr().As4() {
		t.Fatalf("at T1: state %s, to %v from %v, ciaddr %v", c.State(), s.To, s.From, r.CIAddr())
	}
	if _, ok := r.Option(header.OptServerID); ok {
		t.Error("a renewing REQUEST names the server")
	}
	// No answer: retransmitted after half the time to T2 (675 s), then T2: REBINDING, broadcast.
	if next := c.Next().Sub(l.Renew); next != 675*time.Second {
		t.Errorf("renewing retransmits after %v, want 675s", next)
	}
	c.Tick(c.Next())
	s = c.Tick(l.Rebind)
	if msgOf(t, s, header.DHCPRequest); c.State() != Rebinding || s.To.IsValid() {
		t.Fatalf("at T2: state %s, to %v", c.State(), s.To)
	}
	// A renewal in REBINDING binds again with new times, the address kept.
	now := l.Rebind.Add(time.Minute)
	s = c.Receive(now, reply(s.Send, header.DHCPAck, "10.0.2.100", 3600))
	if s.Bound == nil || s.Lost != nil || !s.Bound.Expires.Equal(now.Add(time.Hour)) || c.State() != Bound {
		t.Fatalf("rebinding ACK: %+v, state %s", s, c.State())
	}
	// Nothing answers until the lease ends: the address goes and DISCOVER suggests it again.
	l = *s.Bound
	for c.State() != Selecting {
		if s = c.Tick(c.Next()); c.Next().After(l.Expires) && c.State() != Selecting {
			t.Fatalf("waits past the lease's end in %s", c.State())
		}
	}
	d := msgOf(t, s, header.DHCPDiscover)
	if s.Lost == nil || s.Lost.Address != l.Address {
		t.Fatalf("at the end of the lease: %+v", s)
	}
	if a, _ := d.OptionIPv4(header.OptRequestedIP); a != l.Address.Addr().As4() {
		t.Errorf("DISCOVER after expiry suggests %v", a)
	}
}

// Replies not for this transaction or this interface, and malformed ones, are dropped with
// the field named, and change nothing.
func TestHostileReplies(t *testing.T) {
	c := newClient(nil)
	d := msgOf(t, c.Start(t0), header.DHCPDiscover)
	offer := reply(d, header.DHCPOffer, "10.0.2.100", 60)
	mutate := func(f func(b []byte)) []byte { b := append([]byte(nil), offer...); f(b); return b }
	for _, c2 := range []struct {
		field string
		pkt   []byte
	}{
		{"shorter than 240", offer[:200]},
		{"magic cookie", mutate(func(b []byte) { b[236] = 0 })},
		{"op 1", mutate(func(b []byte) { b[0] = 1 })},
		{"hlen", mutate(func(b []byte) { b[2] = 16 })},
		{"xid", mutate(func(b []byte) { b[4] ^= 0xff })},
		{"chaddr", mutate(func(b []byte) { b[28+5] ^= 1 })},
		{"option 53", mutate(func(b []byte) { b[240] = 0xfe })},
		{"yiaddr", reply(d, header.DHCPOffer, "255.255.255.255", 60)},
		{"message type 5 unexpected in SELECTING", reply(d, header.DHCPAck, "10.0.2.100", 60)},
	} {
		if s := c.Receive(t0, c2.pkt); !strings.Contains(s.Dropped, c2.field) || s.Send != nil || s.Bound != nil {
			t.Errorf("%s: step %+v", c2.field, s)
		}
		if c.State() != Selecting {
			t.Fatalf("%s: state %s", c2.field, c.State())
		}
	}
	r := msgOf(t, c.Receive(t0, offer), header.DHCPRequest)
	w := header.NewDHCPMessage(2, r.XID(), [4]byte{}, [4]byte{10, 0, 2, 100}, server.As4(), mac, false)
	w.Add(header.OptMessageType, header.DHCPAck)
	w.AddUint32(header.OptLeaseTime, 60)
	if s := c.Receive(t0, w.End()); !strings.Contains(s.Dropped, "option 1 (subnet mask)") || c.State() != Requesting {
		t.Errorf("ACK without a mask: %+v, state %s", s, c.State())
	}
	w = header.NewDHCPMessage(2, r.XID(), [4]byte{}, [4]byte{10, 0, 2, 100}, server.As4(), mac, false)
	w.Add(header.OptMessageType, header.DHCPAck)
	w.AddIPv4s(header.OptSubnetMask, [4]byte{255, 0, 255, 0})
	w.AddUint32(header.OptLeaseTime, 60)
	if s := c.Receive(t0, w.End()); !strings.Contains(s.Dropped, "contiguous") {
		t.Errorf("ACK with a broken mask: %+v", s)
	}
	w = header.NewDHCPMessage(2, r.XID(), [4]byte{}, [4]byte{10, 0, 2, 100}, server.As4(), mac, false)
	w.Add(header.OptMessageType, header.DHCPAck)
	w.AddIPv4s(header.OptSubnetMask, [4]byte{255, 255, 255, 0})
	if s := c.Receive(t0, w.End()); !strings.Contains(s.Dropped, "option 51") {
		t.Errorf("ACK without a lease time: %+v", s)
	}
}

// Retransmissions back off 4, 8, 16, 32, 64, 64 s, each ±1 s; a REQUEST without an answer is
// sent 4 times, then the client starts over.
func TestBackoff(t *testing.T) {
	c := newClient(nil)
	now := t0
	d := msgOf(t, c.Start(now), header.DHCPDiscover)
	for _, base := range []time.Duration{4, 8, 16, 32, 64, 64} {
		wait := c.Next().Sub(now)
		if wait < (base-1)*time.Second || wait > (base+1)*time.Second {
			t.Fatalf("retransmission after %v, want %v s ±1 s", wait, base)
		}
		now = c.Next()
		if m := msgOf(t, c.Tick(now), header.DHCPDiscover); m.XID() != d.XID() {
			t.Fatal("a retransmission changed the transaction")
		}
	}
	r := msgOf(t, c.Receive(now, reply(d, header.DHCPOffer, "10.0.2.100", 60)), header.DHCPRequest)
	for range requestTries - 1 {
		now = c.Next()
		msgOf(t, c.Tick(now), header.DHCPRequest)
	}
	d2 := msgOf(t, c.Tick(c.Next()), header.DHCPDiscover)
	if d2.XID() == r.XID() || c.State() != Selecting {
		t.Fatalf("after %d unanswered REQUESTs: state %s", requestTries, c.State())
	}
}

// A NAK while requesting starts over; while renewing it takes the address away.
func TestNak(t *testing.T) {
	c := newClient(nil)
	d := msgOf(t, c.Start(t0), header.DHCPDiscover)
	r := msgOf(t, c.Receive(t0, reply(d, header.DHCPOffer, "10.0.2.100", 60)), header.DHCPRequest)
	if s := c.Receive(t0, reply(r, header.DHCPNak, "", 0)); msgOf(t, s, header.DHCPDiscover).XID() == r.XID() || s.Lost != nil {
		t.Fatalf("NAK while requesting: %+v", s)
	}
	c = newClient(nil)
	l := bind(t, c, 60)
	s := c.Tick(l.Renew)
	s = c.Receive(l.Renew, reply(s.Send, header.DHCPNak, "", 0))
	if msgOf(t, s, header.DHCPDiscover); s.Lost == nil || s.Lost.Address != l.Address || c.State() != Selecting {
		t.Fatalf("NAK while renewing: %+v, state %s", s, c.State())
	}
	if _, held := c.Lease(); held {
		t.Error("a lease held after a NAK")
	}
}

// A remembered lease: unexpired, INIT-REBOOT asks for it (broadcast, no server, no ciaddr);
// a NAK (nic_router's answer when a restart lost its leases) starts over suggesting it; an
// expired one is only suggested.
func TestRemembered(t *testing.T) {
	old := &Lease{Address: netip.MustParsePrefix("10.0.2.150/24"), Server: server, Expires: t0.Add(time.Minute)}
	c := newClient(old)
	s := c.Start(t0)
	r := msgOf(t, s, header.DHCPRequest)
	a, _ := r.OptionIPv4(header.OptRequestedIP)
	if _, named := r.Option(header.OptServerID); c.State() != Rebooting || a != [4]byte{10, 0, 2, 150} || named || r.CIAddr() != [4]byte{} || s.To.IsValid() {
		t.Fatalf("INIT-REBOOT: state %s, option 50 %v, server named %v, ciaddr %v", c.State(), a, named, r.CIAddr())
	}
	d := msgOf(t, c.Receive(t0, reply(r, header.DHCPNak, "", 0)), header.DHCPDiscover)
	if a, _ := d.OptionIPv4(header.OptRequestedIP); a != [4]byte{10, 0, 2, 150} {
		t.Errorf("DISCOVER after the NAK suggests %v", a)
	}
	// An ACK to INIT-REBOOT binds at once.
	c = newClient(old)
	r = msgOf(t, c.Start(t0), header.DHCPRequest)
	if s := c.Receive(t0, reply(r, header.DHCPAck, "10.0.2.150", 60)); s.Bound == nil || s.Bound.Address != old.Address {
		t.Fatalf("ACK to INIT-REBOOT: %+v", s)
	}
	c = newClient(old)
	d = msgOf(t, c.Start(t0.Add(time.Hour)), header.DHCPDiscover)
	if a, _ := d.OptionIPv4(header.OptRequestedIP); a != [4]byte{10, 0, 2, 150} {
		t.Errorf("DISCOVER with an expired lease suggests %v", a)
	}
}

// RELEASE goes to the server from the address held, naming the server; without a lease
// nothing is sent. Either way the client stops.
func TestRelease(t *testing.T) {
	c := newClient(nil)
	l := bind(t, c, 60)
	s := c.Release()
	m := msgOf(t, s, header.DHCPRelease)
	if a, _ := m.OptionIPv4(header.OptServerID); s.To != server || s.From != l.Address.Addr() || m.CIAddr() != l.Address.Addr().As4() || a != server.As4() {
		t.Fatalf("RELEASE %+v", s)
	}
	if c.State() != Released || !c.Next().IsZero() || c.Tick(t0.Add(time.Hour)).Send != nil {
		t.Fatal("a released client goes on")
	}
	c = newClient(nil)
	c.Start(t0)
	if s := c.Release(); s.Send != nil {
		t.Fatalf("RELEASE without a lease: %+v", s)
	}
}

// Whatever a network does (answers, garbage, silence, lease times), the client holds a lease
// only bound, renewing or rebinding, sends only its own chaddr and transaction, never waits
// for a time already past, and reports every address it loses and only those it had.
func TestMachineProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var remembered *Lease
		if rapid.Bool().Draw(t, "remembered") {
			remembered = &Lease{Address: netip.MustParsePrefix("10.0.2.150/24"), Server: server,
				Expires: t0.Add(time.Duration(rapid.IntRange(-100, 100).Draw(t, "expires")) * time.Second)}
		}
		c := New(Config{MAC: mac, Remembered: remembered, Rand: rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 0))})
		now := t0
		var held *Lease
		var last []byte
		check := func(s Step) {
			if s.Send != nil {
				m, ok := header.NewDHCP(s.Send)
				if !ok || m.ClientMAC() != mac || (c.State() != Released && m.XID() != c.xid) {
					t.Fatalf("sent %x", s.Send)
				}
				last = s.Send
			}
			if s.Lost != nil && (held == nil || s.Lost.Address != held.Address) {
				t.Fatalf("lost %v, held %v", s.Lost.Address, held)
			}
			if s.Lost != nil {
				held = nil
			}
			if s.Bound != nil {
				held = s.Bound
			}
			if l, ok := c.Lease(); ok != (held != nil) || ok && l.Address != held.Address {
				t.Fatalf("state %s holds %v, the steps say %v", c.State(), ok, held)
			}
			if c.State() != Released && !c.Next().After(now) {
				t.Fatalf("state %s: next %v is not after now %v", c.State(), c.Next(), now)
			}
		}
		check(c.Start(now))
		for range rapid.IntRange(1, 40).Draw(t, "events") {
			switch rapid.IntRange(0, 5).Draw(t, "event") {
			case 0:
				now = c.Next()
				check(c.Tick(now))
			case 1:
				until := now.Add(time.Duration(rapid.IntRange(0, 5000).Draw(t, "wait")) * time.Second)
				for !c.Next().After(until) {
					now = c.Next()
					check(c.Tick(now))
				}
				now = until
			case 2, 3:
				if last == nil {
					continue
				}
				typ := rapid.SampledFrom([]uint8{header.DHCPOffer, header.DHCPAck, header.DHCPNak}).Draw(t, "type")
				addr := rapid.SampledFrom([]string{"10.0.2.100", "10.0.2.101", "10.0.2.0", "0.0.0.0"}).Draw(t, "addr")
				check(c.Receive(now, reply(last, typ, addr, uint32(rapid.IntRange(0, 7200).Draw(t, "lease")))))
			case 4:
				check(c.Receive(now, rapid.SliceOfN(rapid.Byte(), 0, 400).Draw(t, "garbage")))
			case 5:
				if rapid.IntRange(0, 10).Draw(t, "release") == 0 {
					s := c.Release()
					if (held != nil) != (s.Send != nil) {
						t.Fatalf("release with a lease %v sent %v", held, s.Send != nil)
					}
					return
				}
			}
		}
	})
}
