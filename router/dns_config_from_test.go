package router

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
)

// upstream is a fake DHCP server on the far side of an uplink: it answers the router's
// DISCOVER with an OFFER and its REQUEST with an ACK of the lease it is set to give, or with
// nothing while silent.
type upstream struct {
	addr, mask, gw [4]byte
	dns            [][4]byte
	domain         string
	lease          uint32
	silent         bool
}

// serve answers what the router sent on its uplink until it sends nothing more, and returns
// the frames that were no DHCP requests.
func (u *upstream) serve(b *bench, up *Interface, upp *fakePort) [][]byte {
	var other [][]byte
	for out := upp.take(); len(out) > 0; out = upp.take() {
		for _, f := range out {
			reply := u.reply(b.t, f)
			if reply == nil {
				other = append(other, f)
			} else if !u.silent {
				b.send(up, reply)
			}
		}
	}
	return other
}

func (u *upstream) reply(t testing.TB, f []byte) []byte {
	p := parse(t, f)
	if p.ip == nil || p.dport != header.DHCPServerPort {
		return nil
	}
	m, ok := header.NewDHCP(p.ip.Payload()[8:])
	if !ok {
		t.Fatal("router sent a broken DHCP request")
	}
	typ := uint8(header.DHCPAck)
	if m.MessageType() == header.DHCPDiscover {
		typ = header.DHCPOffer
	}
	server := u.gw
	w := header.NewDHCPMessage(2, m.XID(), [4]byte{}, u.addr, server, m.ClientMAC(), true)
	w.Add(header.OptMessageType, typ)
	w.AddIPv4s(header.OptServerID, server)
	w.AddUint32(header.OptLeaseTime, u.lease)
	w.AddIPv4s(header.OptSubnetMask, u.mask)
	w.AddIPv4s(header.OptRouter, u.gw)
	if len(u.dns) > 0 {
		w.AddIPv4s(header.OptDNSServer, u.dns...)
	}
	if u.domain != "" {
		w.Add(header.OptDomainName, []byte(u.domain)...)
	}
	return udpFrame(macGateway, header.Broadcast, server, [4]byte{255, 255, 255, 255},
		header.DHCPServerPort, header.DHCPClientPort, w.End())
}

// dhcpLease runs a client's DISCOVER and REQUEST through the router and returns the ACK.
func dhcpLease(t *testing.T, b *bench, vm *Interface, vmp *fakePort, xid uint32) header.DHCP {
	t.Helper()
	b.send(vm, dhcpRequest(vm.MAC(), header.DHCPDiscover, xid, [4]byte{}))
	offer := dhcpReplyOf(t, vmp)
	b.send(vm, dhcpRequest(vm.MAC(), header.DHCPRequest, xid+1, offer.YIAddr()))
	ack := dhcpReplyOf(t, vmp)
	if ack.MessageType() != header.DHCPAck {
		t.Fatalf("no ACK: message type %d", ack.MessageType())
	}
	return ack
}

// linkConfig is Genode's nic_router_dhcp test router: its uplink domain is a DHCP client,
// its downlink's DHCP server hands out the uplink's DNS config.
const linkConfig = `<config verbose_domain_state="yes" verbose="yes" udp_idle_timeout_sec="3600">
  <policy label="uplink" domain="uplink"/>
  <default-policy domain="downlink"/>
  <domain name="uplink">
    <nat domain="downlink" udp-ports="10"/>
  </domain>
  <domain name="downlink" interface="10.0.3.1/24">
    <dhcp-server ip_first="10.0.3.2" ip_last="10.0.3.9" ip_lease_time_sec="6" dns_config_from="uplink"/>
    <udp dst="0.0.0.0/0"><permit-any domain="uplink"/></udp>
  </domain>
</config>`

// The downlink's Nic sessions see their link down until the uplink has a lease, and get the
// lease's DNS servers and domain from the downlink's DHCP server. A renewal that brings other
// DNS servers takes their link down and up (the client asks again and gets the new ones) and
// keeps the link states through the uplink; one that brings another address ends those too;
// a lost lease leaves the link down until the next one.
func TestDNSConfigFromFollowsUplinkLease(t *testing.T) {
	b := newBench(t, linkConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	if vm.LinkUp() {
		t.Fatal("link up while the dns_config_from domain has no IPv4 config")
	}
	b.send(vm, dhcpRequest(vm.MAC(), header.DHCPDiscover, 1, [4]byte{}))
	if len(vmp.take()) != 0 {
		t.Fatal("DHCP server answered without DNS config")
	}
	// Nor does anything else reach a Nic session whose link is down: here the ARP request
	// for a peer in the domain.
	_, peer := b.attach("peer", Nic, header.MAC{})
	b.send(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.3.2"), ip4("10.0.3.5"), 1, 2, nil))
	if len(vmp.take())+len(peer.take()) != 0 {
		t.Fatal("frames sent over a link that is down")
	}
	u := &upstream{addr: ip4("10.2.3.2"), mask: ip4("255.255.255.0"), gw: ip4("10.2.3.1"), lease: 600,
		dns: [][4]byte{ip4("1.2.3.4"), ip4("2.3.4.5"), ip4("3.4.5.6")}, domain: "genode.org"}
	up, upp := b.attach("uplink", Uplink, macUplink)
	if !up.LinkUp() {
		t.Fatal("an uplink's link is always up")
	}
	u.serve(b, up, upp)
	if !slices.Equal(vmp.link, []bool{false, true}) {
		t.Fatalf("link state calls %v after the uplink's lease, want down (at attach) and up", vmp.link)
	}
	ack := dhcpLease(t, b, vm, vmp, 10)
	if got := ack.OptionIPv4s(header.OptDNSServer); !slices.Equal(got, u.dns) {
		t.Fatalf("DNS servers %v, want %v", got, u.dns)
	}
	if v, _ := ack.Option(header.OptDomainName); string(v) != "genode.org" {
		t.Fatalf("DNS domain %q", v)
	}
	for _, want := range []string{
		`msg="dynamic IP config" domain=uplink config="interface 10.2.3.2/24, gateway 10.2.3.1, DNS server 1.2.3.4, DNS server 2.3.4.5, DNS server 3.4.5.6, DNS domain genode.org"`,
		`msg="link state" domain=downlink state=up reason="DNS config from uplink"`,
	} {
		if !strings.Contains(b.log.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, b.log.String())
		}
	}

	// A UDP flow from the VM through the uplink's NAT.
	b.send(up, arpFrame(header.ARPReply, macGateway, ip4("10.2.3.1"), macUplink, ip4("10.2.3.2"), macUplink))
	flow := func() [][]byte {
		b.send(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.3.2"), ip4("198.51.100.1"), 4000, 53, []byte("q")))
		return upp.take()
	}
	if len(flow()) != 1 || len(b.r.links) != 1 {
		t.Fatal("UDP not routed through the uplink")
	}

	// At half the lease the uplink renews and gets other DNS servers at the same address.
	u.dns, u.domain = [][4]byte{ip4("4.5.6.7"), ip4("5.6.7.8")}, ""
	b.clock.advance(300 * time.Second)
	b.r.Tick()
	u.serve(b, up, upp)
	if !slices.Equal(vmp.link, []bool{false, true, false, true}) {
		t.Fatalf("link state calls %v after new DNS servers, want down and up", vmp.link)
	}
	if len(b.r.links) != 1 {
		t.Fatal("a renewal that keeps the address ended the link states through the uplink")
	}
	ack = dhcpLease(t, b, vm, vmp, 20)
	if got := ack.OptionIPv4s(header.OptDNSServer); !slices.Equal(got, u.dns) || ack.YIAddr() != ip4("10.0.3.2") {
		t.Fatalf("after the new lease upstream: DNS servers %v at %v", got, ack.YIAddr())
	}
	if _, ok := ack.Option(header.OptDomainName); ok {
		t.Fatal("DNS domain announced after the upstream lease dropped it")
	}

	// The next renewal brings another address: the link states through the uplink end.
	u.addr = ip4("10.2.3.7")
	b.clock.advance(300 * time.Second)
	b.r.Tick()
	u.serve(b, up, upp)
	if len(b.r.links) != 0 || b.r.domains["uplink"].ports[pUDP].InUse() != 0 {
		t.Fatal("link states kept across a new uplink address")
	}
	if !slices.Equal(vmp.link, []bool{false, true, false, true, false, true}) {
		t.Fatalf("link state calls %v after a new uplink address", vmp.link)
	}
	b.send(up, arpFrame(header.ARPReply, macGateway, ip4("10.2.3.1"), macUplink, ip4("10.2.3.7"), macUplink))
	if out := flow(); len(out) != 1 || parse(t, out[0]).src() != ip4("10.2.3.7") {
		t.Fatal("no new link state from the new address")
	}

	// Without an answer to the renewal the lease ends: the link goes down and stays down.
	u.silent = true
	b.clock.advance(300 * time.Second)
	b.r.Tick()
	u.serve(b, up, upp)
	b.clock.advance(301 * time.Second)
	b.r.Tick()
	u.serve(b, up, upp)
	if !slices.Equal(vmp.link, []bool{false, true, false, true, false, true, false}) || vm.LinkUp() {
		t.Fatalf("link state calls %v after the lease ended", vmp.link)
	}
	if !strings.Contains(b.log.String(), `msg="dynamic IP config" domain=uplink config=none`) ||
		!strings.Contains(b.log.String(), `msg="link state" domain=downlink state=down`) {
		t.Errorf("log lacks the end of the lease:\n%s", b.log.String())
	}
	b.send(vm, dhcpRequest(vm.MAC(), header.DHCPDiscover, 30, [4]byte{}))
	if len(vmp.take()) != 0 {
		t.Fatal("the VM got a frame over a link that is down")
	}
	u.silent = false
	b.clock.advance(10 * time.Second) // the discover timeout
	b.r.Tick()
	u.serve(b, up, upp)
	if !vm.LinkUp() {
		t.Fatal("link not up with the next lease")
	}
}

// An uplink domain left without interface, by a reconfiguration that moves its session
// elsewhere or by the session's end (its driver's link went down), loses its DHCP config, and
// the downlink its link; a static <dns-server> beside dns_config_from wins and binds no link.
func TestDNSConfigFromUplinkDetached(t *testing.T) {
	b := newBench(t, linkConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	up, upp := b.attach("uplink", Uplink, macUplink)
	u := &upstream{addr: ip4("10.2.3.2"), mask: ip4("255.255.255.0"), gw: ip4("10.2.3.1"), lease: 600, dns: [][4]byte{ip4("1.2.3.4")}}
	u.serve(b, up, upp)
	b.r.Configure(modelOf(t, strings.Replace(linkConfig, `<policy label="uplink" domain="uplink"/>`,
		`<policy label="uplink" domain="elsewhere"/> <domain name="elsewhere" interface="10.9.9.1/24"/>`, 1)))
	if !slices.Equal(vmp.link, []bool{false, true, false}) {
		t.Fatalf("link state calls %v after the uplink session moved away", vmp.link)
	}
	b.r.Configure(modelOf(t, linkConfig))
	u.serve(b, up, upp)
	b.r.Detach(up)
	if !slices.Equal(vmp.link, []bool{false, true, false, true, false}) {
		t.Fatalf("link state calls %v after the uplink session came back and ended", vmp.link)
	}
	b.r.Configure(modelOf(t, strings.Replace(linkConfig, `dns_config_from="uplink"/>`,
		`dns_config_from="uplink"><dns-server ip="9.9.9.9"/></dhcp-server>`, 1)))
	if !vm.LinkUp() {
		t.Fatal("a static DNS server beside dns_config_from still binds the link")
	}
	if got := dhcpLease(t, b, vm, vmp, 1).OptionIPv4s(header.OptDNSServer); !slices.Equal(got, [][4]byte{ip4("9.9.9.9")}) {
		t.Fatalf("DNS servers %v, want the static one", got)
	}
}

// dhcpRangeConfig has a DHCP server on domain a and a domain b for a client to move to.
const dhcpRangeConfig = `<config verbose="yes">
  <policy label="move" domain="a"/>
  <default-policy domain="a"/>
  <domain name="a" interface="10.0.1.1/24">
    <dhcp-server ip_first="10.0.1.2" ip_last="10.0.1.9"><dns-server ip="1.1.1.1"/></dhcp-server>
  </domain>
  <domain name="b" interface="10.0.2.1/24"/>
</config>`

// A reconfigured DHCP server keeps the leases that it still can, as Genode's does: with the
// same offer, those in its new range; with another (here other DNS servers) none. A client
// that lost its lease, or moved to another domain, sees its link go down and up; the others
// see nothing.
func TestDHCPServerReconfigurationResetsLeases(t *testing.T) {
	b := newBench(t, dhcpRangeConfig)
	vm1, p1 := b.attach("vm1", Nic, header.MAC{})
	vm2, p2 := b.attach("vm2", Nic, header.MAC{})
	if a := dhcpLease(t, b, vm1, p1, 1).YIAddr(); a != ip4("10.0.1.2") {
		t.Fatalf("vm1 got %v", a)
	}
	if a := dhcpLease(t, b, vm2, p2, 3).YIAddr(); a != ip4("10.0.1.3") {
		t.Fatalf("vm2 got %v", a)
	}
	allocs := func() int { return len(b.r.domains["a"].dhcpServer.allocs) }

	b.r.Configure(modelOf(t, dhcpRangeConfig))
	if allocs() != 2 || !slices.Equal(p1.link, []bool{true}) || !slices.Equal(p2.link, []bool{true}) {
		t.Fatalf("the same config: %d leases, links %v %v", allocs(), p1.link, p2.link)
	}

	b.r.Configure(modelOf(t, strings.Replace(dhcpRangeConfig, `ip_first="10.0.1.2"`, `ip_first="10.0.1.3"`, 1)))
	if allocs() != 1 || b.r.domains["a"].dhcpServer.allocs[vm2.MAC()] == nil {
		t.Fatal("the new range did not keep exactly vm2's lease")
	}
	if !slices.Equal(p1.link, []bool{true, false, true}) || !slices.Equal(p2.link, []bool{true}) {
		t.Fatalf("links after the range change: %v %v", p1.link, p2.link)
	}
	if !strings.Contains(b.log.String(), `msg="dismiss DHCP allocation" domain=a mac=02:02:02:02:02:01 ip=10.0.1.2 reason="no IP"`) {
		t.Errorf("no log of the dismissed lease:\n%s", b.log.String())
	}
	b.send(vm2, dhcpRequest(vm2.MAC(), header.DHCPRequest, 5, ip4("10.0.1.3")))
	if m := dhcpReplyOf(t, p2); m.MessageType() != header.DHCPAck {
		t.Fatal("a kept lease is not renewed")
	}
	if a := dhcpLease(t, b, vm1, p1, 6).YIAddr(); a != ip4("10.0.1.4") {
		t.Fatalf("vm1 got %v in the new range", a)
	}

	b.r.Configure(modelOf(t, strings.Replace(dhcpRangeConfig, `1.1.1.1`, `8.8.8.8`, 1)))
	if allocs() != 0 || len(p1.link) != 5 || len(p2.link) != 3 || !vm1.LinkUp() || !vm2.LinkUp() {
		t.Fatalf("other DNS servers: %d leases, links %v %v", allocs(), p1.link, p2.link)
	}
	dhcpLease(t, b, vm2, p2, 7)

	b.r.Configure(modelOf(t, strings.Replace(strings.Replace(dhcpRangeConfig, `1.1.1.1`, `8.8.8.8`, 1),
		`<default-policy domain="a"/>`, `<policy label="vm2" domain="b"/> <default-policy domain="a"/>`, 1)))
	if allocs() != 0 || len(p2.link) != 5 || !vm2.LinkUp() || vm2.Domain() != "b" || len(p1.link) != 5 {
		t.Fatalf("vm2 moved: %d leases, links %v %v", allocs(), p1.link, p2.link)
	}
}

// ip_lease_time_sec="0", as an absent one, is Genode's default of 3600 s.
func TestDHCPLeaseTimeZeroIsDefault(t *testing.T) {
	b := newBench(t, strings.Replace(dhcpRangeConfig, `ip_last="10.0.1.9"`, `ip_last="10.0.1.9" ip_lease_time_sec="0"`, 1))
	vm, p := b.attach("vm", Nic, header.MAC{})
	ack := dhcpLease(t, b, vm, p, 1)
	if v, _ := ack.OptionUint32(header.OptLeaseTime); v != 3600 {
		t.Fatalf("lease time %d", v)
	}
	b.clock.advance(3599 * time.Second)
	b.r.Tick()
	if len(b.r.domains["a"].dhcpServer.allocs) != 1 {
		t.Fatal("lease ended before 3600 s")
	}
	b.clock.advance(time.Second)
	b.r.Tick()
	if len(b.r.domains["a"].dhcpServer.allocs) != 0 {
		t.Fatal("lease did not end at 3600 s")
	}
}

// A reconfiguration that changes what the dns_config_from domain offers (here it turns from
// a DHCP client into a static domain, without DNS servers) takes the dependent Nic sessions'
// links down and up; one that changes nothing leaves them alone.
func TestDNSConfigFromSourceReconfigured(t *testing.T) {
	b := newBench(t, linkConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	up, upp := b.attach("uplink", Uplink, macUplink)
	u := &upstream{addr: ip4("10.2.3.2"), mask: ip4("255.255.255.0"), gw: ip4("10.2.3.1"), lease: 600, dns: [][4]byte{ip4("1.2.3.4")}}
	u.serve(b, up, upp)
	b.r.Configure(modelOf(t, linkConfig))
	if !slices.Equal(vmp.link, []bool{false, true}) {
		t.Fatalf("link state calls %v after the same config", vmp.link)
	}
	static := strings.Replace(linkConfig, `<domain name="uplink">`, `<domain name="uplink" interface="10.2.3.50/24" gateway="10.2.3.1">`, 1)
	b.r.Configure(modelOf(t, static))
	if !slices.Equal(vmp.link, []bool{false, true, false, true}) {
		t.Fatalf("link state calls %v after the uplink became static", vmp.link)
	}
	if _, ok := dhcpLease(t, b, vm, vmp, 1).Option(header.OptDNSServer); ok {
		t.Fatal("DNS servers announced that the static uplink does not have")
	}
}
