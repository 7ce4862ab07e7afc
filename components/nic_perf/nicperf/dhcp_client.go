package nicperf

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// dhcpClient gets a session its address, as Genode's nic_perf client does: DISCOVER, REQUEST
// the first OFFER, and with the ACK the session has its address. At half the lease it asks to
// renew, a quarter of the lease later to rebind, another quarter later it starts over with
// DISCOVER (keeping the address meanwhile, as Genode's does). A DISCOVER or REQUEST without
// answer for 2 s starts over too.
type dhcpClient struct {
	state    dhcpState
	xid      uint32
	deadline time.Time
	lease    time.Duration
}

type dhcpState uint8

const (
	dhcpInit dhcpState = iota
	dhcpSelecting
	dhcpRequesting
	dhcpBound
	dhcpRenewing
	dhcpRebinding
)

// dhcpTimeout is how long DISCOVER and REQUEST wait for their answer, Genode's 2 s.
const dhcpTimeout = 2 * time.Second

// step sends what is due at now and returns when the client wants to go on.
func (c *dhcpClient) step(p *Perf, out *packetstream.Source, now time.Time) time.Time {
	if c.state != dhcpInit && now.Before(c.deadline) {
		return c.deadline
	}
	switch c.state {
	case dhcpBound:
		c.rerequest(p, out, dhcpRenewing, now)
	case dhcpRenewing:
		c.rerequest(p, out, dhcpRebinding, now)
	default:
		c.discover(p, out, now)
	}
	return c.deadline
}

func (c *dhcpClient) discover(p *Perf, out *packetstream.Source, now time.Time) {
	c.xid++
	c.state, c.deadline = dhcpSelecting, now.Add(dhcpTimeout)
	c.send(p, out, header.DHCPDiscover, [4]byte{}, [4]byte{}, [4]byte{})
}

// rerequest asks the server to extend the lease of the session's address.
func (c *dhcpClient) rerequest(p *Perf, out *packetstream.Source, next dhcpState, now time.Time) {
	c.state, c.deadline = next, now.Add(c.lease/4)
	c.send(p, out, header.DHCPRequest, p.ip, [4]byte{}, [4]byte{})
}

// send sends a DISCOVER or REQUEST from client (zero before the session has its address);
// requested and server name the offer a REQUEST takes.
func (c *dhcpClient) send(p *Perf, out *packetstream.Source, typ uint8, client, requested, server [4]byte) {
	mac := p.cfg.MAC
	w := header.NewDHCPMessage(1, c.xid, client, [4]byte{}, [4]byte{}, mac, false)
	w.Add(header.OptMessageType, typ)
	w.Add(header.OptParamList, header.OptMessageType, header.OptServerID, header.OptLeaseTime,
		header.OptDNSServer, header.OptSubnetMask, header.OptRouter)
	w.Add(header.OptClientID, 1, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5])
	var max [2]byte
	binary.BigEndian.PutUint16(max[:], 1024-(header.EthLen+header.IPv4Len+header.UDPLen)) // Genode's, of its 1024-byte frame
	w.Add(header.OptMaxMessageSize, max[:]...)
	if requested != ([4]byte{}) {
		w.AddIPv4s(header.OptRequestedIP, requested)
		w.AddIPv4s(header.OptServerID, server)
	}
	p.sendDHCP(out, header.Broadcast, client, limitBroadcast, header.DHCPClientPort, header.DHCPServerPort, w.End())
}

// receive takes a reply meant for this client (its MAC, its transaction) in the state that
// waits for it; anything else is dropped. (Either way the frame counts as other.)
func (c *dhcpClient) receive(p *Perf, out *packetstream.Source, e header.Eth, msg header.DHCP, now time.Time) {
	if (e.Dst() != p.cfg.MAC && e.Dst() != header.Broadcast) || msg.ClientMAC() != p.cfg.MAC || msg.XID() != c.xid {
		return
	}
	typ := msg.MessageType()
	switch {
	case c.state == dhcpSelecting && typ == header.DHCPOffer:
		server, ok := msg.OptionIPv4(header.OptServerID)
		if !ok {
			return
		}
		c.state, c.deadline = dhcpRequesting, now.Add(dhcpTimeout)
		c.send(p, out, header.DHCPRequest, [4]byte{}, msg.YIAddr(), server)
	case (c.state == dhcpRequesting || c.state == dhcpRenewing || c.state == dhcpRebinding) && typ == header.DHCPAck:
		lease, ok := msg.OptionUint32(header.OptLeaseTime)
		if !ok {
			return
		}
		c.lease = time.Duration(max(lease, 1)) * time.Second // a zero lease would renew in a loop
		if c.state == dhcpRequesting {
			p.ip, p.template = msg.YIAddr(), nil
			p.log.Info("Got IP address " + netip.AddrFrom4(p.ip).String())
		}
		if p.onLease != nil {
			p.onLease(leaseOf(msg, lease, c.state))
		}
		c.state, c.deadline = dhcpBound, now.Add(c.lease/2)
	}
}

// Lease is what a DHCP ACK gave the session (Perf.OnLease).
type Lease struct {
	Completed  string // the state the ACK completed: "request", "renew" or "rebind"
	Seconds    uint32 // the lease time
	Interface  netip.Prefix
	Router     netip.Addr // invalid when the ACK names none
	DNSServers []netip.Addr
	DNSDomain  string
}

// OnLease has fn called with each lease the session's DHCP client gets, on Run's goroutine,
// before it runs.
func (p *Perf) OnLease(fn func(Lease)) { p.onLease = fn }

func leaseOf(msg header.DHCP, seconds uint32, state dhcpState) Lease {
	l := Lease{Completed: "request", Seconds: seconds}
	switch state {
	case dhcpRenewing:
		l.Completed = "renew"
	case dhcpRebinding:
		l.Completed = "rebind"
	}
	bits := 32
	if mask, ok := msg.OptionIPv4(header.OptSubnetMask); ok {
		bits = 0
		for m := binary.BigEndian.Uint32(mask[:]); m&(1<<31) != 0; m <<= 1 {
			bits++
		}
	}
	l.Interface = netip.PrefixFrom(netip.AddrFrom4(msg.YIAddr()), bits)
	if r, ok := msg.OptionIPv4(header.OptRouter); ok {
		l.Router = netip.AddrFrom4(r)
	}
	for _, a := range msg.OptionIPv4s(header.OptDNSServer) {
		l.DNSServers = append(l.DNSServers, netip.AddrFrom4(a))
	}
	if d, ok := msg.Option(header.OptDomainName); ok {
		// A peer's bytes: what is not printable ASCII prints as a dot.
		l.DNSDomain = strings.Map(func(r rune) rune {
			if r < 0x20 || r > 0x7e {
				return '.'
			}
			return r
		}, string(d))
	}
	return l
}
