package router

import (
	"strings"
	"testing"

	"github.com/nicstack/nicstack/netdev/header"
)

// TestGenodeFramePrint pins the packet log format to what Genode's print functions write
// (repos/os/src/lib/net: Ethernet_frame, Arp_packet, Ipv4_packet, Tcp_packet, Udp_packet,
// Dhcp_packet, Icmp_packet), trailing spaces included; a header the frame cannot hold says
// so, as nic_dump's printer, which this is, does.
func TestGenodeFramePrint(t *testing.T) {
	vm := header.MAC{2, 2, 2, 2, 2, 1}
	dhcp := header.NewDHCPMessage(1, 7, [4]byte{}, [4]byte{}, ip4("10.0.1.1"), vm, false)
	dhcp.Add(header.OptMessageType, header.DHCPDiscover)
	bootp := header.NewDHCPMessage(2, 7, [4]byte{}, [4]byte{}, [4]byte{}, vm, false)
	short := udpFrameT(vm, routerMACNic, ip4("10.0.1.2"), ip4("10.0.1.1"), 1, 2, nil)
	for _, c := range []struct {
		name  string
		frame []byte
		want  string
	}{
		{"arp request", arpFrame(header.ARPRequest, vm, ip4("10.0.1.2"), header.MAC{}, ip4("10.0.1.1"), header.Broadcast),
			"ETH 02:02:02:02:02:01 > ff:ff:ff:ff:ff:ff ARP 02:02:02:02:02:01 10.0.1.2 > 00:00:00:00:00:00 10.0.1.1 cmd 1"},
		{"arp reply", arpFrame(header.ARPReply, routerMACNic, ip4("10.0.1.1"), vm, ip4("10.0.1.2"), vm),
			"ETH 02:02:02:02:02:00 > 02:02:02:02:02:01 ARP 02:02:02:02:02:00 10.0.1.1 > 02:02:02:02:02:01 10.0.1.2 cmd 2"},
		{"tcp", tcpFrame(vm, routerMACNic, ip4("10.0.1.2"), ip4("1.2.3.4"), 4000, 80, header.TCPSyn|header.TCPAck|header.TCPFin, 1, 0, nil),
			"ETH 02:02:02:02:02:01 > 02:02:02:02:02:00 IPV4 10.0.1.2 > 1.2.3.4 TCP 4000 > 80 flags 'fsa' "},
		{"udp", udpFrameT(vm, routerMACNic, ip4("10.0.1.2"), ip4("1.2.3.4"), 5000, 53, []byte("q")),
			"ETH 02:02:02:02:02:01 > 02:02:02:02:02:00 IPV4 10.0.1.2 > 1.2.3.4 UDP 5000 > 53 "},
		{"dhcp", udpFrameT(vm, header.Broadcast, [4]byte{}, ip4("255.255.255.255"), 68, 67, dhcp.End()),
			"ETH 02:02:02:02:02:01 > ff:ff:ff:ff:ff:ff IPV4 0.0.0.0 > 255.255.255.255 UDP 68 > 67 DHCP DISCOVER 02:02:02:02:02:01 > 10.0.1.1"},
		// Genode's opcode_to_string names BOOTP's reply (op 2) "REQUEST", and op 1 "REPLY".
		{"bootp", udpFrameT(vm, header.Broadcast, [4]byte{}, ip4("255.255.255.255"), 67, 68, bootp.End()),
			"ETH 02:02:02:02:02:01 > ff:ff:ff:ff:ff:ff IPV4 0.0.0.0 > 255.255.255.255 UDP 67 > 68 DHCP REQUEST 02:02:02:02:02:01 > 0.0.0.0"},
		{"icmp", icmpEcho(vm, routerMACNic, ip4("10.0.1.2"), ip4("10.0.1.1"), header.ICMPEchoRequest, 1, 1),
			"ETH 02:02:02:02:02:01 > 02:02:02:02:02:00 IPV4 10.0.1.2 > 10.0.1.1 ICMP 8 0"},
		{"other ethertype", ethFrame(vm, header.Broadcast, header.EtherTypeIPv6, make([]byte, 40)),
			"ETH 02:02:02:02:02:01 > ff:ff:ff:ff:ff:ff "},
		{"truncated udp", short[:header.EthLen+20+4],
			"ETH 02:02:02:02:02:01 > 02:02:02:02:02:00 IPV4 10.0.1.2 > 10.0.1.1 UDP truncated (4 bytes)"},
	} {
		if got := genodeFrame(c.frame); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// TestVerboseLogLines: verbose_packets and verbose_packet_drop log as Genode's nic_router
// does: "[domain] rcv ...", "[domain] snd ...", "[domain] drop packet (reason)"; a frame from
// an interface without domain is "[?]" under the config's verbose.
func TestVerboseLogLines(t *testing.T) {
	b := newBench(t, `<config verbose="yes" verbose_packets="yes" verbose_packet_drop="yes">
  <policy label="vm" domain="lan"/>
  <domain name="lan" interface="10.0.1.1/24"/>
</config>`)
	vm, _ := b.attach("vm", Nic, header.MAC{})
	stray, _ := b.attach("stray", Nic, header.MAC{})
	b.send(vm, icmpEcho(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("10.0.1.1"), header.ICMPEchoRequest, 1, 1))
	b.send(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("192.168.1.1"), 1, 2, nil))
	b.send(stray, udpFrameT(stray.MAC(), routerMACNic, ip4("10.0.1.9"), ip4("192.168.1.1"), 1, 2, nil))
	log := b.log.String()
	for _, want := range []string{
		`msg="[lan] rcv ETH 02:02:02:02:02:01 > 02:02:02:02:02:00 IPV4 10.0.1.2 > 10.0.1.1 ICMP 8 0"`,
		`msg="[lan] snd ETH 02:02:02:02:02:00 > 02:02:02:02:02:01 IPV4 10.0.1.1 > 10.0.1.2 ICMP 0 0"`,
		`msg="[lan] drop packet (unroutable)"`,
		`msg="[?] rcv ETH 02:02:02:02:02:02 > 02:02:02:02:02:00 IPV4 10.0.1.9 > 192.168.1.1 UDP 1 > 2 "`,
		`msg="[?] drop packet (no domain)"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s\n%s", want, log)
		}
	}
}
