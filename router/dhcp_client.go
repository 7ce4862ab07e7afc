package router

import (
	"net/netip"
	"time"

	"github.com/nicstack/nicstack/router/header"
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
		return
	case clientRenewing:
		r.log.Info("DHCP lease ended", "domain", d.name)
		r.setIPConfig(d, ipConfig{})
	}
	c.discover(r, d)
}

// receive handles a reply to the router's DHCP client in domain d.
func (c *dhcpClient) receive(r *Router, d *domain, i *Interface, ip header.IPv4) {
	msg, ok := header.NewDHCP(ip.Payload()[8:])
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
		if !ok || (c.state == clientRenewing && cfg.addr != d.ip.addr) {
			r.log.Info("DHCP ACK lacks address, subnet mask or lease time, or changes the address", "domain", d.name)
			if c.state == clientRenewing {
				r.setIPConfig(d, ipConfig{})
			}
			c.discover(r, d)
			return
		}
		renewal := c.state == clientRenewing
		c.state = clientBound
		c.leaseEnd = r.now.Add(lease)
		c.deadline = r.now.Add(lease / 2)
		if !renewal || !sameIPConfig(d.ip, cfg) {
			r.setIPConfig(d, cfg)
		}
	case typ == header.DHCPNak:
		if c.state == clientBound || c.state == clientRenewing {
			r.setIPConfig(d, ipConfig{})
		}
		c.discover(r, d)
	default:
		r.drop(d, "unexpected DHCP reply")
	}
}

func sameIPConfig(a, b ipConfig) bool {
	if a.valid != b.valid || a.addr != b.addr || a.mask != b.mask || a.gateway != b.gateway ||
		a.hasGW != b.hasGW || a.dnsDomain != b.dnsDomain || len(a.dns) != len(b.dns) {
		return false
	}
	for k := range a.dns {
		if a.dns[k] != b.dns[k] {
			return false
		}
	}
	return true
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

// setIPConfig changes a DHCP-client domain's IPv4 config: its interfaces' link state
// follows, and link states through it end when the config goes away.
func (r *Router) setIPConfig(d *domain, c ipConfig) {
	d.ip = c
	r.gen++
	if rc := r.cfg.Report; rc != nil && rc.ConfigTriggers {
		r.reportTrigger = true
	}
	if r.cfg.VerboseDomainState {
		if c.valid {
			r.log.Info("domain IPv4 config", "domain", d.name, "interface", c.prefix(), "gateway", netip.AddrFrom4(c.gateway), "dns", c.dns)
		} else {
			r.log.Info("domain IPv4 config", "domain", d.name, "interface", "none")
		}
	}
	if !c.valid {
		clear(d.arp)
		for l := range r.links {
			if l.sides[0].dom == d || l.sides[1].dom == d {
				r.dissolve(l, "IPv4 config of "+d.name+" ended")
			}
		}
	}
	for _, i := range d.ifs {
		r.setLink(i, c.valid)
	}
}
