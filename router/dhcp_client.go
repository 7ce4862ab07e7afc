package router

import (
	"net/netip"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
)

// dhcpClient configures a domain without interface attribute: DISCOVER on every interface
// of the domain, take the first OFFER, REQUEST it, and on ACK the domain has an IPv4 config;
// at half the lease it asks to renew, and without an ACK the config ends with the lease.
// Anything unexpected starts over with DISCOVER.
type dhcpClient struct {
	state    clientState
	xid      uint32
	offered  [4]byte
	server   [4]byte
	deadline time.Time
	leaseEnd time.Time
	slot     int32 // in the state region, while it has a lease
}

type clientState uint8

const (
	clientIdle clientState = iota
	clientSelecting
	clientRequesting
	clientBound
	clientRenewing
)

// interfaceAdded starts discovery when the domain gets its first interface.
func (c *dhcpClient) interfaceAdded(r *Router, d *domain) {
	if c.state == clientIdle {
		c.discover(r, d)
	}
}

func (c *dhcpClient) discover(r *Router, d *domain) {
	defer r.keepClient(d)
	if len(d.ifs) == 0 {
		c.state = clientIdle
		return
	}
	r.xid++
	c.xid, c.state = r.xid, clientSelecting
	c.deadline = r.now.Add(r.cfg.DHCPDiscoverTimeout)
	c.send(r, d, header.DHCPDiscover)
}

func (c *dhcpClient) send(r *Router, d *domain, typ uint8) {
	for _, i := range d.ifs {
		w := header.NewDHCPMessage(1, c.xid, [4]byte{}, [4]byte{}, [4]byte{}, i.routerMAC, true)
		w.Add(header.OptMessageType, typ)
		if typ == header.DHCPRequest { // selecting and renewing alike: name address and server
			w.AddIPv4s(header.OptRequestedIP, c.offered)
			w.AddIPv4s(header.OptServerID, c.server)
		}
		r.emit(i, udpFrame(i.routerMAC, header.Broadcast, [4]byte{}, [4]byte{255, 255, 255, 255},
			header.DHCPClientPort, header.DHCPServerPort, w.End()))
	}
}

func (c *dhcpClient) tick(r *Router, d *domain) {
	if c.state == clientIdle || r.now.Before(c.deadline) {
		return
	}
	switch c.state {
	case clientBound:
		c.state, c.deadline = clientRenewing, c.leaseEnd
		c.send(r, d, header.DHCPRequest)
		r.keepClient(d)
		return
	case clientRenewing:
		r.log.Info("DHCP lease ended", "domain", d.name)
		r.setIPConfig(d, ipConfig{})
	}
	c.discover(r, d)
}

// receive handles a reply to the router's DHCP client in domain d.
func (c *dhcpClient) receive(r *Router, d *domain, i *Interface, ip header.IPv4) {
	msg, ok := header.NewDHCP(ip.Payload()[header.UDPLen:])
	if !ok || msg.Op() != 2 || msg.XID() != c.xid || msg.ClientMAC() != i.routerMAC {
		r.drop(d, "DHCP reply not for this client")
		return
	}
	switch typ := msg.MessageType(); {
	case typ == header.DHCPOffer && c.state == clientSelecting:
		c.offered = msg.YIAddr()
		c.server, _ = msg.OptionIPv4(header.OptServerID)
		c.state = clientRequesting
		c.deadline = r.now.Add(r.cfg.DHCPRequestTimeout)
		c.send(r, d, header.DHCPRequest)
	case typ == header.DHCPAck && (c.state == clientRequesting || c.state == clientRenewing):
		cfg, lease, ok := configFromAck(msg)
		if !ok {
			r.log.Info("DHCP ACK lacks address, subnet mask or lease time", "domain", d.name)
			if c.state == clientRenewing {
				r.setIPConfig(d, ipConfig{})
			}
			c.discover(r, d)
			return
		}
		c.state, c.offered = clientBound, cfg.addr
		c.leaseEnd = r.now.Add(lease)
		c.deadline = r.now.Add(lease / 2)
		// As in Genode, the usual renewal (the same config) changes nothing; any other ACK,
		// a renewal with another address or other DNS servers too, replaces the config.
		if !sameIPConfig(d.ip, cfg) {
			r.setIPConfig(d, cfg)
		}
		r.keepClient(d)
	case typ == header.DHCPNak:
		if c.state == clientBound || c.state == clientRenewing {
			r.setIPConfig(d, ipConfig{})
		}
		c.discover(r, d)
	default:
		r.drop(d, "unexpected DHCP reply")
	}
}

func configFromAck(msg header.DHCP) (ipConfig, time.Duration, bool) {
	mask, ok1 := msg.OptionIPv4(header.OptSubnetMask)
	leaseRaw, ok2 := msg.Option(header.OptLeaseTime)
	if !ok1 || !ok2 || len(leaseRaw) != 4 {
		return ipConfig{}, 0, false
	}
	bits := 0
	for m := be(mask); m&(1<<31) != 0; m <<= 1 {
		bits++
	}
	pfx := netip.PrefixFrom(netip.AddrFrom4(msg.YIAddr()), bits)
	if bits == 0 || bits > 31 || pfx.Addr() == pfx.Masked().Addr() {
		return ipConfig{}, 0, false
	}
	var gw netip.Addr
	if g, ok := msg.OptionIPv4(header.OptRouter); ok && pfx.Masked().Contains(netip.AddrFrom4(g)) {
		gw = netip.AddrFrom4(g)
	}
	cfg := newIPConfig(pfx, gw)
	for _, a := range msg.OptionIPv4s(header.OptDNSServer) {
		cfg.dns = append(cfg.dns, netip.AddrFrom4(a))
	}
	if v, ok := msg.Option(header.OptDomainName); ok {
		cfg.dnsDomain = string(v)
	}
	lease := time.Duration(be([4]byte(leaseRaw))) * time.Second
	return cfg, lease, true
}
