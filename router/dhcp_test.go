package router

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
)

func dhcpRequest(mac header.MAC, typ uint8, xid uint32, requested [4]byte) []byte {
	w := header.NewDHCPMessage(1, xid, [4]byte{}, [4]byte{}, [4]byte{}, mac, true)
	w.Add(header.OptMessageType, typ)
	if requested != ([4]byte{}) {
		w.AddIPv4s(header.OptRequestedIP, requested)
	}
	return udpFrame(mac, header.Broadcast, [4]byte{}, [4]byte{255, 255, 255, 255}, header.DHCPClientPort, header.DHCPServerPort, w.End())
}

func dhcpReplyOf(t *testing.T, p *fakePort) header.DHCP {
	t.Helper()
	out := p.take()
	if len(out) != 1 {
		t.Fatalf("got %d frames, want one DHCP reply", len(out))
	}
	pk := parse(t, out[0])
	if pk.sport != header.DHCPServerPort || pk.dport != header.DHCPClientPort {
		t.Fatalf("reply ports %d > %d", pk.sport, pk.dport)
	}
	m, ok := header.NewDHCP(pk.ip.Payload()[8:])
	if !ok {
		t.Fatal("reply is no DHCP message")
	}
	return m
}

// optionCodes lists the options of a message in order.
func optionCodes(m header.DHCP) []byte {
	var out []byte
	o := m[240:]
	for len(o) >= 2 && o[0] != header.OptEnd {
		out = append(out, o[0])
		o = o[2+int(o[1]):]
	}
	return out
}

func TestDHCPServerExchange(t *testing.T) {
	b := newBench(t, natConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	b.send(vm, dhcpRequest(vm.MAC(), header.DHCPDiscover, 42, [4]byte{}))
	offer := dhcpReplyOf(t, vmp)
	if offer.MessageType() != header.DHCPOffer || offer.XID() != 42 || offer.YIAddr() != ip4("10.0.1.2") {
		t.Fatalf("offer type %d xid %d yiaddr %v", offer.MessageType(), offer.XID(), offer.YIAddr())
	}
	if got, want := optionCodes(offer), []byte{53, 54, 51, 1, 3, 6, 15, 28}; !bytes.Equal(got, want) {
		t.Fatalf("option order %v, want %v", got, want)
	}
	check := func(code uint8, want [4]byte) {
		if v, _ := offer.OptionIPv4(code); v != want {
			t.Errorf("option %d = %v, want %v", code, v, want)
		}
	}
	check(header.OptServerID, ip4("10.0.1.1"))
	check(header.OptSubnetMask, ip4("255.255.255.0"))
	check(header.OptRouter, ip4("10.0.1.1"))
	check(header.OptDNSServer, ip4("198.18.0.53"))
	check(header.OptBroadcast, ip4("10.0.1.255"))
	if v, _ := offer.Option(header.OptDomainName); string(v) != "example.org" {
		t.Errorf("domain name %q", v)
	}
	if v, _ := offer.Option(header.OptLeaseTime); be([4]byte(v)) != 100 {
		t.Errorf("lease time %v", v)
	}
	b.send(vm, dhcpRequest(vm.MAC(), header.DHCPRequest, 43, ip4("10.0.1.2")))
	if ack := dhcpReplyOf(t, vmp); ack.MessageType() != header.DHCPAck || ack.YIAddr() != ip4("10.0.1.2") {
		t.Fatalf("no ACK: type %d", ack.MessageType())
	}
	// Another client gets the next address; a third gets the last; a fourth gets nothing.
	macs := []header.MAC{{2, 9, 9, 9, 9, 1}, {2, 9, 9, 9, 9, 2}, {2, 9, 9, 9, 9, 3}}
	for k, mac := range macs {
		b.send(vm, dhcpRequest(mac, header.DHCPDiscover, 50, [4]byte{}))
		out := vmp.take()
		if k < 2 {
			if len(out) != 1 {
				t.Fatalf("client %d got no offer", k)
			}
		} else if len(out) != 0 {
			t.Fatal("offer beyond ip_last")
		}
	}
	// The un-requested offers expire after dhcp_offer_timeout_sec (10 s) and the range frees.
	b.clock.advance(10 * time.Second)
	b.r.Tick()
	b.send(vm, dhcpRequest(macs[2], header.DHCPDiscover, 51, [4]byte{}))
	if o := dhcpReplyOf(t, vmp); o.YIAddr() != ip4("10.0.1.3") {
		t.Fatalf("expired offer not reused: %v", o.YIAddr())
	}
	// The lease (100 s) ends too.
	b.clock.advance(91 * time.Second)
	b.r.Tick()
	if len(b.r.domains["default"].dhcpServer.allocs) != 0 {
		t.Fatal("lease did not expire")
	}
}

// A DISCOVER that suggests a free address of the range gets it; one that suggests a taken
// address or one outside the range gets the first free one.
func TestDHCPServerSuggestedAddress(t *testing.T) {
	b := newBench(t, natConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	for k, c := range []struct{ want, got string }{
		{"10.0.1.3", "10.0.1.3"}, // free: taken
		{"10.0.1.3", "10.0.1.2"}, // another's now
		{"10.0.9.9", "10.0.1.4"}, // outside the range
	} {
		b.send(vm, dhcpRequest(header.MAC{2, 9, 9, 9, 9, byte(k)}, header.DHCPDiscover, uint32(k), ip4(c.want)))
		if o := dhcpReplyOf(t, vmp); o.YIAddr() != ip4(c.got) {
			t.Errorf("DISCOVER %d suggesting %s: offered %v, want %s", k, c.want, o.YIAddr(), c.got)
		}
	}
}

func TestDHCPServerNak(t *testing.T) {
	b := newBench(t, natConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	b.send(vm, dhcpRequest(vm.MAC(), header.DHCPRequest, 1, ip4("10.0.1.3")))
	if m := dhcpReplyOf(t, vmp); m.MessageType() != header.DHCPNak {
		t.Fatal("request without offer not NAKed")
	}
	b.send(vm, dhcpRequest(vm.MAC(), header.DHCPDiscover, 2, [4]byte{}))
	dhcpReplyOf(t, vmp)
	b.send(vm, dhcpRequest(vm.MAC(), header.DHCPRequest, 3, ip4("10.0.1.4")))
	m := dhcpReplyOf(t, vmp)
	if m.MessageType() != header.DHCPNak {
		t.Fatal("request for another address not NAKed")
	}
	if got := optionCodes(m); !bytes.Equal(got, []byte{53, 54}) {
		t.Fatalf("NAK options %v", got)
	}
}

// TestChainedRoutersDHCP wires router A's uplink (a DHCP-client domain) to a Nic session of
// router B (a DHCP-server domain) and checks that A gets its address, gateway and DNS
// config, and that A's own DHCP server hands out B's DNS server (dns_config_from).
func TestChainedRoutersDHCP(t *testing.T) {
	rb := newBench(t, `<config>
  <default-policy domain="lan"/>
  <domain name="lan" interface="10.0.5.1/24">
    <dhcp-server ip_first="10.0.5.10" ip_last="10.0.5.20" ip_lease_time_sec="60">
      <dns-server ip="10.0.5.53"/><dns-domain name="lan.test"/>
    </dhcp-server>
  </domain>
</config>`)
	ra := newBench(t, `<config verbose_domain_state="yes">
  <policy label="up" domain="up"/><default-policy domain="inner"/>
  <domain name="up"/>
  <domain name="inner" interface="10.0.6.1/24">
    <dhcp-server ip_first="10.0.6.2" ip_last="10.0.6.9" dns_config_from="up"/>
  </domain>
</config>`)
	ra.clock = rb.clock // one time for both
	ra.r.clock = rb.clock
	bSide, bPort := rb.attach("router-a", Nic, header.MAC{})
	inner, innerPort := ra.attach("vm", Nic, header.MAC{})
	aUp, aPort := ra.attach("up", Uplink, bSide.MAC())
	// Until the uplink is configured, A's DHCP server stays silent.
	ra.send(inner, dhcpRequest(inner.MAC(), header.DHCPDiscover, 1, [4]byte{}))
	if len(innerPort.take()) != 0 {
		t.Fatal("DHCP server answered without DNS config from its dns_config_from domain")
	}
	pump := func() {
		for k := 0; k < 4; k++ {
			for _, f := range aPort.take() {
				rb.send(bSide, f)
			}
			for _, f := range bPort.take() {
				ra.send(aUp, f)
			}
		}
	}
	pump()
	up := ra.r.domains["up"]
	if !up.ip.valid || up.ip.prefix() != netip.MustParsePrefix("10.0.5.10/24") || up.ip.gateway != ip4("10.0.5.1") {
		t.Fatalf("A's uplink config %+v", up.ip)
	}
	if len(up.ip.dns) != 1 || up.ip.dns[0] != netip.MustParseAddr("10.0.5.53") || up.ip.dnsDomain != "lan.test" {
		t.Fatalf("A's DNS config %v %q", up.ip.dns, up.ip.dnsDomain)
	}
	if !aUp.LinkUp() {
		t.Fatal("uplink interface not up after DHCP")
	}
	ra.send(inner, dhcpRequest(inner.MAC(), header.DHCPDiscover, 2, [4]byte{}))
	offer := dhcpReplyOf(t, innerPort)
	if v, _ := offer.OptionIPv4(header.OptDNSServer); v != ip4("10.0.5.53") {
		t.Fatalf("dns_config_from not applied: %v", v)
	}
	// Detaching the last uplink ends the config; the next uplink asks again.
	ra.r.Detach(aUp)
	if up.ip.valid {
		t.Fatal("config of a DHCP-client domain kept without interfaces")
	}
	aUp, aPort = ra.attach("up", Uplink, bSide.MAC())
	pump()
	if !up.ip.valid || !aUp.LinkUp() {
		t.Fatal("no config after the uplink came back")
	}
	// At half the lease (60 s) A renews and keeps its config and link states.
	rb.clock.advance(31 * time.Second)
	ra.r.Tick()
	if out := aPort.take(); len(out) != 1 {
		t.Fatalf("no renewing REQUEST: %d frames", len(out))
	} else {
		rb.send(bSide, out[0])
		for _, f := range bPort.take() {
			ra.send(aUp, f)
		}
	}
	rb.clock.advance(40 * time.Second) // past the first lease's end
	ra.r.Tick()
	if !up.ip.valid {
		t.Fatal("renewed lease not extended")
	}
	// Without an answer to the next renewal the config ends with the lease, and discovery
	// starts over.
	aPort.take()
	rb.clock.advance(61 * time.Second)
	ra.r.Tick()
	ra.r.Tick()
	if up.ip.valid {
		t.Fatal("config kept after the lease")
	}
	if out := aPort.take(); len(out) != 1 || dhcpType(t, out[0]) != header.DHCPDiscover {
		t.Fatal("no new DISCOVER after the lease")
	}
}

func dhcpType(t *testing.T, f []byte) uint8 {
	m, ok := header.NewDHCP(parse(t, f).ip.Payload()[8:])
	if !ok {
		t.Fatal("no DHCP message")
	}
	return m.MessageType()
}

// lanConfig is a LAN's router with a DHCP server, for a router behind it.
const lanConfig = `<config>
  <default-policy domain="lan"/>
  <domain name="lan" interface="198.18.7.1/24">
    <dhcp-server ip_first="198.18.7.100" ip_last="198.18.7.110"><dns-server ip="198.18.7.53"/></dhcp-server>
  </domain>
</config>`

// sculptBehindDHCP is Sculpt's usual router config: the uplink a DHCP client with NAT for
// the default domain, whose DHCP server takes DNS from the uplink.
const sculptBehindDHCP = `<config verbose_domain_state="yes">
  <default-policy domain="default"/>
  <policy label="nic_drv -> " domain="uplink"/>
  <domain name="uplink">
    <nat domain="default" tcp-ports="1000" udp-ports="1000" icmp-ids="1000"/>
  </domain>
  <domain name="default" interface="10.0.1.1/24">
    <dhcp-server ip_first="10.0.1.2" ip_last="10.0.1.253" dns_config_from="uplink"/>
    <tcp dst="0.0.0.0/0"><permit-any domain="uplink"/></tcp>
    <udp dst="0.0.0.0/0"><permit-any domain="uplink"/></udp>
    <icmp dst="0.0.0.0/0" domain="uplink"/>
  </domain>
</config>`

// TestSculptShapeBehindDHCP runs Genode's usual Sculpt config: the uplink domain is a DHCP
// client with NAT for the default domain, whose DHCP server takes DNS from the uplink. A VM
// gets an address and DNS, and its traffic leaves translated to the DHCP-assigned address.
func TestSculptShapeBehindDHCP(t *testing.T) {
	lan := newBench(t, lanConfig)
	sculpt := newBench(t, sculptBehindDHCP)
	sculpt.r.clock = lan.clock
	wire, wirePort := lan.attach("sculpt", Nic, header.MAC{})
	up, upPort := sculpt.attach("nic_drv -> ", Uplink, wire.MAC())
	vm, vmPort := sculpt.attach("vm", Nic, header.MAC{})
	pump := func() {
		for k := 0; k < 4; k++ {
			for _, f := range upPort.take() {
				lan.send(wire, f)
			}
			for _, f := range wirePort.take() {
				sculpt.send(up, f)
			}
		}
	}
	pump()
	if !up.LinkUp() {
		t.Fatal("uplink not configured by DHCP")
	}
	sculpt.send(vm, dhcpRequest(vm.MAC(), header.DHCPDiscover, 1, [4]byte{}))
	offer := dhcpReplyOf(t, vmPort)
	if d, _ := offer.OptionIPv4(header.OptDNSServer); d != ip4("198.18.7.53") || offer.YIAddr() != ip4("10.0.1.2") {
		t.Fatalf("VM offer %v with DNS %v", offer.YIAddr(), d)
	}
	// The VM's DNS query leaves with the uplink's DHCP address; the LAN router forwards it
	// domain-locally toward the DNS server after ARP.
	sculpt.send(vm, arpFrame(header.ARPReply, vm.MAC(), ip4("10.0.1.2"), routerMACNic, ip4("10.0.1.1"), routerMACNic))
	sculpt.send(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.7.53"), 3333, 53, []byte("q")))
	out := upPort.take()
	if len(out) != 1 || parse(t, out[0]).arp == nil {
		t.Fatal("no ARP request for the DNS server on the uplink")
	}
	sculpt.send(up, arpFrame(header.ARPReply, macServer, ip4("198.18.7.53"), wire.MAC(), ip4("198.18.7.100"), wire.MAC()))
	out = upPort.take()
	if len(out) != 1 {
		t.Fatal("held DNS query not sent after ARP")
	}
	if p := parse(t, out[0]); p.src() != ip4("198.18.7.100") || p.sport < 49152 || p.eth.Dst() != macServer {
		t.Fatalf("query left as %v:%d to %s", p.src(), p.sport, p.eth.Dst())
	}
}
