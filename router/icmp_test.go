package router

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/netdev/header"
)

// icmpMessage builds an ICMP message of type and code with body and a valid checksum.
func icmpMessage(typ, code uint8, body []byte) []byte {
	m := make([]byte, header.ICMPLen+len(body))
	m[0], m[1] = typ, code
	copy(m[header.ICMPLen:], body)
	header.ICMP(m).UpdateChecksum()
	return m
}

// TestICMPAsGenodeRoutesIt: the router's ICMP handling as Genode's _handle_icmp: a bad
// checksum is dropped before anything else (no echo reply), types other than echo and
// destination unreachable are dropped even where an <ip> rule would route them, an error
// no link state knows is dropped too, and what no rule routes is answered with an ICMP host
// unreachable (not for multicast). Drops are logged in Genode's words.
func TestICMPAsGenodeRoutesIt(t *testing.T) {
	b := newBench(t, `<config verbose_packet_drop="yes">
  <policy label="vm" domain="lan"/> <policy label="up" domain="up"/>
  <domain name="lan" interface="10.0.1.1/24"><ip dst="0.0.0.0/0" domain="up"/></domain>
  <domain name="up" interface="198.18.0.10/24" use_arp="no"/>
</config>`)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	_, upp := b.attach("up", Uplink, macUplink)
	src, dst := ip4("10.0.1.2"), ip4("198.18.0.20")
	icmp := func(to [4]byte, m []byte) []byte {
		return ethFrame(vm.MAC(), routerMACNic, header.EtherTypeIPv4, ipPacket(header.ProtoICMP, src, to, m))
	}
	expect := func(name string, f []byte, toVM, toUp int, logged string) {
		t.Helper()
		b.log.Reset()
		b.send(vm, f)
		if v, u := len(vmp.take()), len(upp.take()); v != toVM || u != toUp {
			t.Errorf("%s: %d frames back, %d out; want %d, %d", name, v, u, toVM, toUp)
		}
		if logged != "" && !strings.Contains(b.log.String(), `msg="[lan] drop packet (`+logged+`)"`) {
			t.Errorf("%s: log lacks the drop reason %q:\n%s", name, logged, b.log.String())
		}
	}
	echo := icmpEcho(vm.MAC(), routerMACNic, src, ip4("10.0.1.1"), header.ICMPEchoRequest, 7, 1)
	expect("echo request to the router", echo, 1, 0, "")
	bad := append([]byte(nil), echo...)
	bad[len(bad)-1] ^= 0xff
	expect("echo request with a bad checksum", bad, 0, 0, "bad ICMP checksum")
	expect("echo request routed by the <ip> rule", icmpEcho(vm.MAC(), routerMACNic, src, dst, header.ICMPEchoRequest, 7, 2), 0, 1, "")
	for _, typ := range []uint8{5 /* redirect */, 11 /* time exceeded */, 13 /* timestamp */} {
		expect(fmt.Sprint("ICMP type ", typ), icmp(dst, icmpMessage(typ, 0, make([]byte, 28))), 0, 0, "unhandled type in ICMP")
	}
	quoted := ipPacket(header.ProtoUDP, dst, src, []byte{0, 53, 0x13, 0x88, 0, 8, 0, 0})
	expect("error without link state", icmp(dst, icmpMessage(header.ICMPDestUnreach, 3, quoted)), 0, 0,
		"no link that matches packet embedded in ICMP error")
	broken := append([]byte(nil), quoted...)
	broken[10] ^= 0xff
	expect("error quoting a broken IPv4 header", icmp(dst, icmpMessage(header.ICMPDestUnreach, 3, broken)), 0, 0,
		"bad checksum in IP packet embedded in ICMP error")

	// Without the <ip> rule the echo is unroutable: host unreachable back, quoting it.
	b.r.Configure(modelOf(t, `<config verbose_packet_drop="yes">
  <policy label="vm" domain="lan"/>
  <domain name="lan" interface="10.0.1.1/24"/>
</config>`))
	f := icmpEcho(vm.MAC(), routerMACNic, src, dst, header.ICMPEchoRequest, 7, 3)
	b.send(vm, f)
	out := vmp.take()
	if len(out) != 1 {
		t.Fatalf("unroutable echo: %d frames back", len(out))
	}
	p := parse(t, out[0])
	if p.icmp.Type() != header.ICMPDestUnreach || p.icmp.Code() != header.ICMPHostUnreachable ||
		p.src() != ip4("10.0.1.1") || p.dst() != src || p.eth.Dst() != vm.MAC() ||
		string(p.icmp.Body()) != string(f[header.EthLen:header.EthLen+28]) {
		t.Fatalf("not a host unreachable quoting the packet: %s", genodeFrame(out[0]))
	}
	if !strings.Contains(b.log.String(), `msg="[lan] drop packet (unroutable)"`) {
		t.Error("unroutable drop not logged")
	}
	expect("unroutable multicast", udpFrameT(vm.MAC(), routerMACNic, src, ip4("239.1.2.3"), 1, 2, nil), 0, 0, "unroutable")
}
