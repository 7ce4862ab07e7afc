package router

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

func TestEchoServer(t *testing.T) {
	b, vm, vmp, _, _ := natBench(t)
	b.send(vm, icmpEcho(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("10.0.1.1"), header.ICMPEchoRequest, 9, 3))
	out := vmp.take()
	if len(out) != 1 {
		t.Fatal("no echo reply")
	}
	p := parse(t, out[0])
	if p.icmp.Type() != header.ICMPEchoReply || p.src() != ip4("10.0.1.1") || p.dst() != ip4("10.0.1.2") || p.eth.Dst() != vm.MAC() {
		t.Fatal("bad echo reply")
	}
	// Switched off per domain.
	b.r.Configure(modelOf(t, strings.Replace(natConfig, `<domain name="default" interface="10.0.1.1/24">`,
		`<domain name="default" interface="10.0.1.1/24" icmp_echo_server="no">`, 1)))
	b.send(vm, icmpEcho(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("10.0.1.1"), header.ICMPEchoRequest, 9, 4))
	if len(vmp.take()) != 0 {
		t.Fatal("echo answered with icmp_echo_server=\"no\"")
	}
}

func TestFragmentsDroppedOrAnswered(t *testing.T) {
	b, vm, vmp, _, upp := natBench(t)
	f := udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 1, 2, []byte("x"))
	ip := header.IPv4(f[header.EthLen:])
	binary.BigEndian.PutUint16(ip[6:], 0x2000) // more fragments
	ip.SetChecksum(0)
	ip.SetChecksum(ip.ComputeChecksum())
	b.send(vm, f)
	if len(upp.take())+len(vmp.take()) != 0 || b.r.Stats().FragmentsSeen.Load() != 1 {
		t.Fatal("fragment not dropped quietly")
	}
	b.r.Configure(modelOf(t, strings.Replace(natConfig, `<config `, `<config icmp_type_3_code_on_fragm_ipv4="4" `, 1)))
	b.send(vm, f)
	out := vmp.take()
	if len(out) != 1 {
		t.Fatal("no ICMP answer to a fragment")
	}
	if p := parse(t, out[0]); p.icmp.Type() != header.ICMPDestUnreach || p.icmp.Code() != 4 {
		t.Fatal("wrong ICMP answer to a fragment")
	}
}

func TestFullDestinationDropsAndCounts(t *testing.T) {
	b, vm, _, _, upp := natBench(t)
	upp.capacity = 1
	for k := 0; k < 3; k++ {
		b.send(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, nil))
	}
	if len(upp.sent) != 1 || b.r.Stats().DroppedFull.Load() != 2 {
		t.Fatalf("sent %d, dropped full %d", len(upp.sent), b.r.Stats().DroppedFull.Load())
	}
}

// TestOffloadSuperFrame routes a TSO super-frame with a pending partial checksum through NAT:
// the frame passes whole with its offload metadata, and the checksum field holds the pseudo
// header sum of the rewritten addresses, so the device computes the right checksum.
func TestOffloadSuperFrame(t *testing.T) {
	b, vm, _, _, upp := natBench(t)
	payload := make([]byte, 60000)
	f := tcpFrame(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 4000, 80, header.TCPAck, 1, 1, payload)
	seg := f[header.EthLen+20:]
	partial := ^header.Checksum(nil, header.PseudoSum(ip4("10.0.1.2"), ip4("198.18.1.1"), header.ProtoTCP, len(seg)))
	binary.BigEndian.PutUint16(seg[16:], partial)
	off := netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOTCPv4, HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
	b.r.Handle(vm, f, &off, 0)
	if len(upp.sent) != 1 || upp.offs[0] != off || len(upp.sent[0]) != len(f) {
		t.Fatal("super-frame not passed whole with its offload metadata")
	}
	out := upp.sent[0][header.EthLen:]
	ip := header.IPv4(out)
	if header.Checksum(ip.Header(), 0) != 0 {
		t.Fatal("IPv4 checksum")
	}
	oseg := ip.Payload()
	want := ^header.Checksum(nil, header.PseudoSum(ip.Src(), ip.Dst(), header.ProtoTCP, len(oseg)))
	if got := binary.BigEndian.Uint16(oseg[16:]); got != want {
		t.Fatalf("partial checksum %#04x, want %#04x", got, want)
	}
	// Completing the checksum as a device would gives a valid segment.
	binary.BigEndian.PutUint16(oseg[16:], 0)
	binary.BigEndian.PutUint16(oseg[16:], header.Checksum(oseg, header.PseudoSum(ip.Src(), ip.Dst(), header.ProtoTCP, len(oseg))))
	if header.Checksum(oseg, header.PseudoSum(ip.Src(), ip.Dst(), header.ProtoTCP, len(oseg))) != 0 {
		t.Fatal("completed checksum invalid")
	}
}

func TestVerboseLogging(t *testing.T) {
	b, vm, _, _, _ := natBench(t)
	b.r.Configure(modelOf(t, strings.Replace(natConfig, `<config `, `<config verbose="yes" verbose_packets="yes" `, 1)))
	b.send(vm, tcpFrame(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 4000, 80, header.TCPSyn, 1, 0, nil))
	log := b.log.String()
	for _, want := range []string{`msg="[default] rcv ETH 02:02:02:02:02:01 > 02:02:02:02:02:00 IPV4 10.0.1.2 > 198.18.1.1 TCP 4000 > 80 flags 's' "`,
		`msg="[uplink] snd ETH 02:00:00:00:00:10 > 02:00:00:00:00:01 IPV4 198.18.0.10 > 198.18.1.1 TCP 49152 > 80 flags 's' "`, "new link state"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

func TestNicClientAndReportTriggers(t *testing.T) {
	b := newBench(t, `<config>
  <report config_triggers="yes" link_state_triggers="yes" interval_sec="7"/>
  <nic-client label="peer" domain="up"/>
  <policy label="peer" domain="lan"/>
  <domain name="up"/>
  <domain name="lan" interface="10.0.1.1/24"/>
</config>`)
	if b.r.ReportInterval().Seconds() != 7 || len(b.r.NicClients()) != 1 {
		t.Fatal("report interval or nic-client list wrong")
	}
	i, p := b.attach("peer", NicClient, macUplink)
	if i.Domain() != "up" || i.MAC() != macUplink {
		t.Fatalf("nic-client in %q with MAC %s", i.Domain(), i.MAC())
	}
	if out := p.take(); len(out) != 1 || parse(t, out[0]).eth.Src() != macUplink {
		t.Fatal("no DHCP discover from the nic-client's MAC")
	}
	b.r.ReportTriggered()
	b.r.setIPConfig(b.r.domains["up"], newIPConfig(netip.MustParsePrefix("10.0.9.2/24"), netip.Addr{}))
	if !b.r.ReportTriggered() || b.r.ReportTriggered() {
		t.Fatal("config change did not trigger exactly one report")
	}
	if len(p.link) != 1 || !p.link[0] {
		t.Fatalf("link state calls %v", p.link)
	}
	// A new interface and a gone one count as link state changes.
	lan, _ := b.attach("lan", Nic, header.MAC{})
	if !b.r.ReportTriggered() {
		t.Fatal("a new interface did not trigger a report")
	}
	b.r.Detach(lan)
	if !b.r.ReportTriggered() {
		t.Fatal("a gone interface did not trigger a report")
	}
}

func TestLinkStatesPerSessionBounded(t *testing.T) {
	b := newBench(t, rulesConfig)
	src, _ := b.attach("src", Nic, header.MAC{})
	b.attach("d2", Nic, header.MAC{})
	for k := 0; k < maxLinksPerInterface+5; k++ {
		b.send(src, tcpFrame(src.MAC(), routerMACNic, ip4("10.0.0.2"), ip4("192.168.7.9"), uint16(k), uint16(k>>16)+1, header.TCPSyn, 1, 0, nil))
	}
	if len(b.r.links) != maxLinksPerInterface || src.links != maxLinksPerInterface {
		t.Fatalf("%d link states", len(b.r.links))
	}
	b.r.Detach(src)
	if len(b.r.links) != 0 {
		t.Fatal("link states outlive their session")
	}
}

func TestCountersPublishedPerBatch(t *testing.T) {
	b, vm, _, up, _ := natBench(t)
	before := vm.Stats().RxFrames.Load()
	b.r.Handle(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 1, 2, nil), nil, 0)
	if vm.Stats().RxFrames.Load() != before {
		t.Fatal("counter visible before the batch ended")
	}
	b.r.Flush()
	if vm.Stats().RxFrames.Load() != before+1 || up.Stats().TxFrames.Load() != 1 || b.r.Stats().Sent.Load() == 0 {
		t.Fatal("counters not published by Flush")
	}
}
