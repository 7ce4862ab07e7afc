package router

import (
	"net/netip"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/model"
)

// dhcpServer hands out addresses of one domain: offers expire after dhcp_offer_timeout_sec
// unless requested, leases after ip_lease_time_sec.
type dhcpServer struct {
	m      *model.DHCPServer
	from   *domain // the dns_config_from domain, nil without
	first  uint32
	last   uint32
	allocs map[header.MAC]*allocation
	used   map[uint32]*allocation
}

type allocation struct {
	ip       [4]byte
	mac      header.MAC
	bound    bool
	deadline time.Time
	ifc      *Interface
	slot     int32 // in the state region
}

func newDHCPServer(m *model.DHCPServer) *dhcpServer {
	return &dhcpServer{m: m, first: be(m.IPFirst.As4()), last: be(m.IPLast.As4()),
		allocs: map[header.MAC]*allocation{}, used: map[uint32]*allocation{}}
}

// alloc allocates the address a DISCOVER suggests (option 50; zero: none) when it is in the
// range and free, as RFC 2131 4.3.1 orders the server's choice, else the first free one: a
// client that lost its lease with a restarted router (nicstack's pod leases after a restart
// of the supervisor) gets its address back. Genode's nic_router ignores the suggestion.
func (s *dhcpServer) alloc(r *Router, i *Interface, mac header.MAC, want [4]byte) *allocation {
	take := func(n uint32) *allocation {
		a := &allocation{mac: mac, ifc: i, deadline: r.now.Add(r.cfg.DHCPOfferTimeout)}
		a.ip = [4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
		s.allocs[mac], s.used[n] = a, a
		return a
	}
	if n := be(want); n >= s.first && n <= s.last && s.used[n] == nil {
		return take(n)
	}
	for n := s.first; n <= s.last && n >= s.first; n++ {
		if s.used[n] == nil {
			return take(n)
		}
	}
	return nil
}

func (s *dhcpServer) free(r *Router, a *allocation) {
	a.ifc.counts.dhcpAllocations++
	r.unkeep(&a.slot)
	delete(s.allocs, a.mac)
	delete(s.used, be(a.ip))
}

// forget frees the allocations made through interface i (its session is gone).
func (s *dhcpServer) forget(r *Router, i *Interface) {
	for _, a := range s.allocs {
		if a.ifc == i {
			s.free(r, a)
		}
	}
}

func (s *dhcpServer) expire(r *Router, d *domain) {
	for _, a := range s.allocs {
		if !r.now.Before(a.deadline) {
			if r.cfg.Verbose {
				r.log.Info("DHCP allocation expired", "domain", d.name, "ip", netip.AddrFrom4(a.ip), "bound", a.bound)
			}
			s.free(r, a)
		}
	}
}

// dns returns the DNS servers and domain name to announce: the configured ones, else those of
// the dns_config_from domain; false while that domain has no IPv4 config (requests then go
// unanswered, and the domain's Nic sessions see their link down).
func (s *dhcpServer) dns() ([]netip.Addr, string, bool) {
	if s.from == nil {
		return s.m.DNSServers, s.m.DNSDomain, true
	}
	return s.from.ip.dns, s.from.ip.dnsDomain, s.from.ip.valid
}

// serveDHCP answers DISCOVER with OFFER, REQUEST with ACK or NAK, and frees on RELEASE and
// DECLINE.
func (r *Router) serveDHCP(i *Interface, d *domain, ip header.IPv4) {
	s := d.dhcpServer
	msg, ok := header.NewDHCP(ip.Payload()[header.UDPLen:])
	if !ok || msg.Op() != 1 {
		r.drop(d, "bad DHCP request")
		return
	}
	dns, dnsDomain, ok := s.dns()
	if !ok {
		r.drop(d, "DHCP server waits for the DNS config of "+s.m.DNSConfigFrom)
		return
	}
	mac := msg.ClientMAC()
	a := s.allocs[mac]
	switch msg.MessageType() {
	case header.DHCPDiscover:
		if a == nil {
			want, _ := msg.OptionIPv4(header.OptRequestedIP)
			if a = s.alloc(r, i, mac, want); a == nil {
				r.drop(d, "DHCP address range used up")
				return
			}
			r.keepLease(d, a)
		}
		r.dhcpReply(i, d, msg, header.DHCPOffer, a.ip, dns, dnsDomain)
	case header.DHCPRequest:
		want, ok := msg.OptionIPv4(header.OptRequestedIP)
		if !ok {
			want = msg.CIAddr()
		}
		if a == nil || a.ip != want {
			if a != nil {
				s.free(r, a)
			}
			r.dhcpReply(i, d, msg, header.DHCPNak, [4]byte{}, nil, "")
			return
		}
		a.bound = true
		a.deadline = r.now.Add(s.m.LeaseTime)
		r.keepLease(d, a)
		r.dhcpReply(i, d, msg, header.DHCPAck, a.ip, dns, dnsDomain)
	case header.DHCPInform:
		r.dhcpReply(i, d, msg, header.DHCPAck, msg.CIAddr(), dns, dnsDomain)
	case header.DHCPRelease, header.DHCPDecline:
		if a != nil {
			s.free(r, a)
		}
	default:
		r.drop(d, "unexpected DHCP message type")
	}
}

// dhcpReply sends a reply with options in Genode's order: 53, 54, 51, 1, 3, 6, 15, 28.
func (r *Router) dhcpReply(i *Interface, d *domain, req header.DHCP, typ uint8, client [4]byte, dns []netip.Addr, dnsDomain string) {
	yi, ci := client, [4]byte{}
	if req.MessageType() == header.DHCPInform {
		yi, ci = [4]byte{}, client
	}
	w := header.NewDHCPMessage(2, req.XID(), ci, yi, d.ip.addr, req.ClientMAC(), false)
	w.Add(header.OptMessageType, typ)
	w.AddIPv4s(header.OptServerID, d.ip.addr)
	if typ != header.DHCPNak {
		w.AddUint32(header.OptLeaseTime, uint32(d.dhcpServer.m.LeaseTime/time.Second))
		var mask [4]byte
		mask[0], mask[1], mask[2], mask[3] = byte(d.ip.mask>>24), byte(d.ip.mask>>16), byte(d.ip.mask>>8), byte(d.ip.mask)
		w.AddIPv4s(header.OptSubnetMask, mask)
		w.AddIPv4s(header.OptRouter, d.ip.addr)
		if len(dns) > 0 {
			as := make([][4]byte, len(dns))
			for k, a := range dns {
				as[k] = a.As4()
			}
			w.AddIPv4s(header.OptDNSServer, as...)
		}
		if dnsDomain != "" {
			w.Add(header.OptDomainName, []byte(dnsDomain)...)
		}
		w.AddIPv4s(header.OptBroadcast, d.ip.broadcast())
	}
	dst := client
	if typ == header.DHCPNak {
		dst = [4]byte{255, 255, 255, 255}
	}
	r.emit(i, udpFrame(i.routerMAC, req.ClientMAC(), d.ip.addr, dst, header.DHCPServerPort, header.DHCPClientPort, w.End()))
}

// udpFrame builds an Ethernet frame with a UDP datagram (checksum filled in).
func udpFrame(srcMAC, dstMAC header.MAC, src, dst [4]byte, sport, dport uint16, payload []byte) []byte {
	n := header.IPv4Len + header.UDPLen + len(payload)
	b := make([]byte, header.EthLen+n)
	e := header.Eth(b)
	e.SetSrc(srcMAC)
	e.SetDst(dstMAC)
	e.SetType(header.EtherTypeIPv4)
	header.PutIPv4(e.Payload(), n, header.ProtoUDP, src, dst)
	u := e.Payload()[header.IPv4Len:]
	copy(u[header.UDPLen:], payload)
	header.PutUDP(u, src, dst, sport, dport)
	return b
}
