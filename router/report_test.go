package router

import (
	"strings"
	"testing"

	"github.com/nicstack/nicstack/netdev/header"
)

// reportConfig asks for everything Genode's <report> offers.
const reportConfig = `<config>
  <policy label="vm" domain="default"/> <policy label="vm2" domain="default"/> <policy label="vm3" domain="default"/>
  <policy label="uplink" domain="uplink"/>
  <nic-client label="peer" domain="peer"/>
  <report bytes="yes" stats="yes" quota="yes" config="yes" link_state="yes" dropped_fragm_ipv4="yes"/>
  <domain name="uplink" interface="198.18.0.10/24" gateway="198.18.0.1">
    <nat domain="default" tcp-ports="1" udp-ports="2" icmp-ids="2"/>
  </domain>
  <domain name="default" interface="10.0.1.1/24">
    <dhcp-server ip_first="10.0.1.2" ip_last="10.0.1.9">
      <dns-server ip="198.18.0.53"/>
    </dhcp-server>
    <tcp dst="0.0.0.0/0"><permit-any domain="uplink"/></tcp>
    <udp dst="0.0.0.0/0"><permit-any domain="uplink"/></udp>
    <icmp dst="0.0.0.0/0" domain="uplink"/>
  </domain>
  <domain name="peer"/>
</config>`

// reportBench brings a router into a fixed state: in the default domain vm (a DHCP lease, a
// TCP link opening, one refused for NAT ports, a UDP link answered and so open, an ICMP link,
// a dropped fragment), vm3 (nothing yet) and vm2, whose departure leaves a destroyed link, a destroyed
// allocation and a dropped fragment to the domain; an uplink holding a frame for ARP; a
// nic-client whose domain has no IPv4 config yet.
func reportBench(t *testing.T) *bench {
	b := newBench(t, reportConfig)
	attach := func(label string, kind Kind, mac header.MAC, ram int) (*Interface, *fakePort) {
		p := &fakePort{}
		return b.r.Attach(Session{Label: label, Kind: kind, MAC: mac, Port: p, RAM: ram}), p
	}
	vm, _ := attach("vm", Nic, header.MAC{}, 3287168)
	vm2, _ := attach("vm2", Nic, header.MAC{}, 3287168)
	up, _ := attach("uplink", Uplink, macUplink, 3287168)
	attach("peer", NicClient, header.MAC{2, 2, 2, 2, 3, 0}, 3287168)
	b.send(up, arpFrame(header.ARPReply, macGateway, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink))

	b.send(vm, dhcpRequest(vm.MAC(), header.DHCPDiscover, 1, [4]byte{}))
	b.send(vm, dhcpRequest(vm.MAC(), header.DHCPRequest, 1, ip4("10.0.1.2")))
	b.send(vm, arpFrame(header.ARPReply, vm.MAC(), ip4("10.0.1.2"), routerMACNic, ip4("10.0.1.1"), routerMACNic))
	b.send(vm, tcpFrame(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 4000, 80, header.TCPSyn, 1, 0, nil))
	b.send(vm, tcpFrame(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 4001, 80, header.TCPSyn, 1, 0, nil))
	b.send(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, []byte("q")))
	b.send(up, udpFrameT(macGateway, macUplink, ip4("198.18.1.1"), ip4("198.18.0.10"), 53, 49152, []byte("a")))
	b.send(vm, icmpEcho(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), header.ICMPEchoRequest, 7, 1))
	frag := udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5001, 53, []byte("f"))
	frag[header.EthLen+6] = 0x20 // more fragments
	b.send(vm, frag)

	b.send(vm2, dhcpRequest(vm2.MAC(), header.DHCPDiscover, 2, [4]byte{}))
	b.send(vm2, udpFrameT(vm2.MAC(), routerMACNic, ip4("10.0.1.3"), ip4("198.18.1.1"), 6000, 53, []byte("q")))
	b.send(vm2, frag)
	b.r.Detach(vm2)

	b.r.Handle(up, udpFrameT(macGateway, macUplink, ip4("198.18.1.1"), ip4("198.18.0.10"), 53, 53, nil), nil, 1) // unroutable
	b.r.Configure(modelOf(t, reportConfig))                                                                      // keeps what the config still allows
	b.r.Handle(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.0.99"), 5002, 53, []byte("held")), nil, 2)
	attach("vm3", Nic, header.MAC{}, 1<<20)
	b.r.Flush()
	return b
}

// TestReportAsGenode compares the report of a fixed router state with what Genode's
// nic_router reports for it (report.cc, Domain::report, Interface::report and the stats'
// report functions): domains by name, each interface last attached first, counts only where
// not 0, rx_bytes of a domain what it received from the router.
func TestReportAsGenode(t *testing.T) {
	b := reportBench(t)
	want := `<state>
	<domain name="default" rx_bytes="1112" tx_bytes="1444" ipv4="10.0.1.1/24" gw="0.0.0.0">
		<udp-links>
			<destroyed value="1"/>
		</udp-links>
		<dhcp-allocations>
			<destroyed value="1"/>
		</dhcp-allocations>
		<dropped-fragm-ipv4 value="1"/>
		<interface label="vm3" link_state="true">
			<ram-quota used="0" limit="1048576" avail="1048576"/>
		</interface>
		<interface label="vm" link_state="true">
			<ram-quota used="46" limit="3287168" avail="3287122"/>
			<tcp-links>
				<refused_for_ports value="1"/>
				<opening value="1"/>
			</tcp-links>
			<udp-links>
				<open value="1"/>
			</udp-links>
			<icmp-links>
				<opening value="1"/>
			</icmp-links>
			<arp-waiters>
				<alive value="1"/>
			</arp-waiters>
			<dhcp-allocations>
				<alive value="1"/>
			</dhcp-allocations>
			<dropped-fragm-ipv4 value="1"/>
		</interface>
	</domain>
	<domain name="peer" rx_bytes="342" tx_bytes="0" ipv4="0.0.0.0/32" gw="0.0.0.0">
		<interface label="peer" link_state="true"/>
	</domain>
	<domain name="uplink" rx_bytes="324" tx_bytes="127" ipv4="198.18.0.10/24" gw="198.18.0.1">
		<interface label="uplink" link_state="true">
			<ram-quota used="0" limit="3287168" avail="3287168"/>
		</interface>
	</domain>
</state>
`
	if got := string(b.r.Report().XML()); got != want {
		t.Errorf("report:\n%s\nwant:\n%s", got, want)
	}
}

// TestReportOptions: each <report> option adds its part only, and a domain or interface with
// nothing to show is left out, as Genode's report_empty leaves it out.
func TestReportOptions(t *testing.T) {
	b := reportBench(t)
	for _, c := range []struct{ report, want string }{
		{`<report bytes="no" config="no" stats="no" quota="no"/>`, "<state/>\n"},
		{`<report bytes="no" config="no" stats="no" quota="no" link_state="yes"/>`, `<state>
	<domain name="default">
		<interface label="vm3" link_state="true"/>
		<interface label="vm" link_state="true"/>
	</domain>
	<domain name="peer">
		<interface label="peer" link_state="true"/>
	</domain>
	<domain name="uplink">
		<interface label="uplink" link_state="true"/>
	</domain>
</state>
`},
		{`<report bytes="no" config="no" stats="no" quota="no" dropped_fragm_ipv4="yes"/>`, `<state>
	<domain name="default">
		<dropped-fragm-ipv4 value="1"/>
		<interface label="vm">
			<dropped-fragm-ipv4 value="1"/>
		</interface>
	</domain>
</state>
`},
	} {
		b.r.Configure(modelOf(t, strings.Replace(reportConfig,
			`<report bytes="yes" stats="yes" quota="yes" config="yes" link_state="yes" dropped_fragm_ipv4="yes"/>`, c.report, 1)))
		if got := string(b.r.Report().XML()); got != c.want {
			t.Errorf("%s:\n%s\nwant:\n%s", c.report, got, c.want)
		}
	}
}
