package router

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/nat"
	"github.com/nicstack/nicstack/router/region"
)

// nat66Config: the lan's IPv6 flows leave NATed to the uplink's address; no rule leads back.
const nat66Config = `<config verbose_packet_drop="yes">
  <policy label_prefix="vm" domain="lan"/> <policy label="up" domain="up"/>
  <domain name="lan" interface="10.0.1.1/24" interface_ipv6="2001:db8:1::1/64">
    <tcp dst="::/0"><permit-any domain="up"/></tcp>
    <udp dst="::/0"><permit-any domain="up"/></udp>
    <icmp dst="::/0" domain="up"/>
  </domain>
  <domain name="up" interface="198.18.0.10/24" interface_ipv6="2001:db8:2::2/64" gateway_ipv6="fe80::1">
    <nat domain="lan" tcp-ports="2" udp-ports="10" icmp-ids="10"/>
  </domain>
</config>`

var (
	up6  = addr6("2001:db8:2::2")
	far6 = addr6("2001:db8:9::9")
)

// nat66Bench is ip6Bench on cfg, keeping its state in mem (nil: none).
func nat66Bench(t *testing.T, cfg string, mem []byte, clock *fakeClock) (*bench, *Interface, *fakePort, *Interface, *fakePort) {
	b := newBench(t, cfg)
	if mem != nil {
		b = keptBench(t, cfg, mem, clock)
	}
	up, upp := b.attach("up", Uplink, macUplink)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	b.clock.advance(2 * time.Second)
	b.r.domains["up"].nd[gwLL6] = macGateway
	b.r.domains["lan"].nd[vm6] = vm.MAC()
	vmp.take()
	upp.take()
	return b, vm, vmp, up, upp
}

// tcp6 is a TCP segment with a valid checksum.
func tcp6(src, dst [16]byte, sport, dport uint16, flags uint8, data []byte) []byte {
	seg := make([]byte, header.TCPLen+len(data))
	header.Ports(seg).SetSrc(sport)
	header.Ports(seg).SetDst(dport)
	seg[12] = 5 << 4
	seg[13] = flags
	copy(seg[header.TCPLen:], data)
	binary.BigEndian.PutUint16(seg[header.TCPChecksumOff:], header.Checksum(seg, header.PseudoSum6(src, dst, header.ProtoTCP, len(seg))))
	return seg
}

// out6 is the one IPv6 frame p got, its transport checksum checked: the packet and its
// ports (an echo's ID as sport).
func out6(t *testing.T, p *fakePort) (header.IPv6, uint16, uint16) {
	t.Helper()
	sent := p.take()
	if len(sent) != 1 {
		t.Fatalf("%d frames out, want 1", len(sent))
	}
	_, ip, m := sent6(t, sent[0])
	if m != nil {
		return ip, m.ID(), m.ID()
	}
	seg := ip.Payload()
	if header.Checksum(seg, header.PseudoSum6(ip.Src(), ip.Dst(), ip.NextHeader(), len(seg))) != 0 {
		t.Fatalf("bad transport checksum in %x", sent[0])
	}
	return ip, header.Ports(seg).Src(), header.Ports(seg).Dst()
}

// NAT66: the lan's UDP, TCP and echo leave from the uplink's address with a port or ID of
// the dynamic range and checksums that hold; the replies come back to the VM's address and
// port by the link state alone (up has no rule); an ICMPv6 error quoting a NATed packet
// reaches the VM quoting what the VM sent; what no link knows does not pass; the TCP quota
// refuses a third connection.
func TestNAT66(t *testing.T) {
	b, vm, vmp, up, upp := nat66Bench(t, nat66Config, nil, nil)
	send := func(i *Interface, src, dst [16]byte, nh uint8, l4 []byte) {
		t.Helper()
		mac, to := vm.MAC(), routerMACNic
		if i == up {
			mac, to = macGateway, macUplink
		}
		b.send(i, ip6Frame(mac, to, src, dst, nh, 64, l4))
	}

	send(vm, vm6, far6, header.ProtoUDP, udp6(vm6, far6, 5000, 53, []byte("query")))
	ip, natPort, dport := out6(t, upp)
	if ip.Src() != up6 || ip.Dst() != far6 || natPort < nat.First || dport != 53 || ip.HopLimit() != 63 {
		t.Fatalf("UDP left from %x port %d", ip.Src(), natPort)
	}
	send(up, far6, up6, header.ProtoUDP, udp6(far6, up6, 53, natPort, []byte("answer")))
	if ip, sport, dport := out6(t, vmp); ip.Src() != far6 || ip.Dst() != vm6 || sport != 53 || dport != 5000 {
		t.Fatalf("answer reached %x:%d", ip.Dst(), dport)
	}
	// Another port at the router's address: no link, no forwarding.
	send(up, far6, up6, header.ProtoUDP, udp6(far6, up6, 53, natPort+1, nil))
	if len(vmp.take()) != 0 {
		t.Fatal("a packet no link knows reached the VM")
	}
	if _, _, m := sent6(t, upp.take()[0]); m.Type() != header.ICMPv6DestUnreach || m.Code() != header.ICMPv6PortUnreachable {
		t.Fatal("a packet to the router's address no link knows not answered with port unreachable")
	}

	// The far end's port unreachable for the NATed packet reaches the VM translated back.
	quote := ip6Frame(macUplink, macGateway, up6, far6, header.ProtoUDP, 63, udp6(up6, far6, natPort, 53, []byte("query")))[header.EthLen:]
	e := make([]byte, header.IPv6Len+header.ICMPv6Len+len(quote))
	n := header.PutICMPv6Error(e, header.ICMPv6DestUnreach, header.ICMPv6PortUnreachable, 0, far6, up6, quote)
	b.send(up, ethFrame(macGateway, macUplink, header.EtherTypeIPv6, e[:n]))
	sent := vmp.take()
	if len(sent) != 1 {
		t.Fatalf("%d frames for the ICMPv6 error", len(sent))
	}
	_, eip, m := sent6(t, sent[0])
	in := header.IPv6(m.Body())
	if m.Type() != header.ICMPv6DestUnreach || eip.Src() != far6 || eip.Dst() != vm6 || in.Src() != vm6 || in.Dst() != far6 ||
		header.Ports(in[header.IPv6Len:]).Src() != 5000 {
		t.Fatalf("error reached %x quoting %x", eip.Dst(), in.Src())
	}

	// Echo: the ID is the NAT's outside, the VM's inside.
	send(vm, vm6, far6, header.ProtoICMPv6, echo6(vm6, far6, 8))
	ip, id, _ := out6(t, upp)
	if ip.Src() != up6 || id < nat.First {
		t.Fatalf("echo left from %x with ID %d", ip.Src(), id)
	}
	reply := make([]byte, header.ICMPv6Len+8)
	header.PutICMPv6Echo(reply, header.ICMPv6EchoReply, id, 1, far6, up6)
	send(up, far6, up6, header.ProtoICMPv6, reply)
	if ip, id, _ := out6(t, vmp); ip.Dst() != vm6 || id != 7 {
		t.Fatalf("echo reply reached %x with ID %d", ip.Dst(), id)
	}

	// TCP: two connections within the quota, a third refused.
	for port := uint16(4000); port < 4003; port++ {
		send(vm, vm6, far6, header.ProtoTCP, tcp6(vm6, far6, port, 80, header.TCPSyn, nil))
	}
	if got := len(upp.take()); got != 2 || b.r.Stats().NATRefused.Load() != 1 {
		t.Fatalf("%d SYNs out, %d refused; want 2 and 1", got, b.r.Stats().NATRefused.Load())
	}
	if l := len(b.r.links); l != 4 {
		t.Fatalf("%d link states, want 4", l)
	}
}

// A super-frame's partial checksum (the pseudo-header's sum, left to the device) gets the new
// addresses only: the device sums the rest, the NAT port included.
func TestNAT66PartialChecksum(t *testing.T) {
	b, vm, _, _, upp := nat66Bench(t, nat66Config, nil, nil)
	seg := tcp6(vm6, far6, 4000, 80, header.TCPSyn, []byte("data"))
	binary.BigEndian.PutUint16(seg[header.TCPChecksumOff:], header.Fold(header.PseudoSum6(vm6, far6, header.ProtoTCP, len(seg))))
	f := ip6Frame(vm.MAC(), routerMACNic, vm6, far6, header.ProtoTCP, 64, seg)
	b.r.Handle(vm, f, &netdev.Offload{Flags: netdev.OffloadNeedsCsum, CsumStart: header.EthLen + header.IPv6Len, CsumOffset: header.TCPChecksumOff}, 0)
	b.r.Flush()
	sent := upp.take()
	if len(sent) != 1 {
		t.Fatalf("%d frames out", len(sent))
	}
	_, ip, _ := sent6(t, sent[0])
	out := ip.Payload()
	want := header.Fold(header.PseudoSum6(up6, far6, header.ProtoTCP, len(out)))
	if got := binary.BigEndian.Uint16(out[header.TCPChecksumOff:]); got != want || ip.Src() != up6 {
		t.Fatalf("partial checksum %#x, want %#x", got, want)
	}
}

// Routed (no NAT): the reply of a flow a rule let out passes back by its link state, with
// no rule of its own for the way back; a packet from outside that no link knows does not.
func TestIPv6LinkWayBack(t *testing.T) {
	cfg := strings.Replace(nat66Config, `<nat domain="lan" tcp-ports="2" udp-ports="10" icmp-ids="10"/>`, "", 1)
	b, vm, vmp, up, upp := nat66Bench(t, cfg, nil, nil)
	b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, far6, header.ProtoUDP, 64, udp6(vm6, far6, 5000, 53, nil)))
	if ip, sport, _ := out6(t, upp); ip.Src() != vm6 || sport != 5000 {
		t.Fatalf("routed UDP left from %x:%d", ip.Src(), sport)
	}
	b.send(up, ip6Frame(macGateway, macUplink, far6, vm6, header.ProtoUDP, 64, udp6(far6, vm6, 53, 5000, nil)))
	if ip, _, dport := out6(t, vmp); ip.Dst() != vm6 || dport != 5000 {
		t.Fatalf("reply reached %x:%d", ip.Dst(), dport)
	}
	b.send(up, ip6Frame(macGateway, macUplink, far6, vm6, header.ProtoUDP, 64, udp6(far6, vm6, 53, 5001, nil)))
	if n := len(vmp.take()); n != 0 {
		t.Fatalf("%d frames of no link passed without a rule", n)
	}
	_ = up
}

// IPv6 link states and their NAT66 ports survive a restart on the state region: the
// restarted router has the same links, and both directions go on with the same NAT port.
func TestRestartKeepsIPv6Links(t *testing.T) {
	mem := make([]byte, region.Size(64))
	b, vm, _, _, upp := nat66Bench(t, nat66Config, mem, nil)
	b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, far6, header.ProtoTCP, 64, tcp6(vm6, far6, 4000, 80, header.TCPSyn, nil)))
	_, natPort, _ := out6(t, upp)
	b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, far6, header.ProtoICMPv6, 64, echo6(vm6, far6, 8)))
	out6(t, upp)
	before := keptState(b.r)

	b2, vm, vmp, up, upp := nat66Bench(t, nat66Config, bytes.Clone(mem), b.clock)
	if got := keptState(b2.r); got != before || !strings.Contains(b2.log.String(), "link_states=2") {
		t.Fatalf("restarted with\n%s\nhad\n%s\nlog:\n%s", got, before, b2.log)
	}
	b2.send(up, ip6Frame(macGateway, macUplink, far6, up6, header.ProtoTCP, 64, tcp6(far6, up6, 80, natPort, header.TCPSyn|header.TCPAck, nil)))
	if ip, _, dport := out6(t, vmp); ip.Dst() != vm6 || dport != 4000 {
		t.Fatalf("SYN-ACK reached %x:%d after the restart", ip.Dst(), dport)
	}
	b2.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, far6, header.ProtoTCP, 64, tcp6(vm6, far6, 4000, 80, header.TCPAck, nil)))
	if ip, sport, _ := out6(t, upp); ip.Src() != up6 || sport != natPort {
		t.Fatalf("ACK left from port %d after the restart, want %d", sport, natPort)
	}
	// The port is taken again: a new flow gets another.
	b2.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, far6, header.ProtoTCP, 64, tcp6(vm6, far6, 4001, 80, header.TCPSyn, nil)))
	if _, sport, _ := out6(t, upp); sport == natPort {
		t.Fatal("a new flow got the restored link's NAT port")
	}
}

// A reconfiguration carries IPv6 links over as IPv4's: the same config keeps them with their
// NAT66 ports (the reply still passes), one whose uplink no longer translates the lan lets
// them go.
func TestReconfigureKeepsIPv6Links(t *testing.T) {
	b, vm, vmp, up, upp := nat66Bench(t, nat66Config, nil, nil)
	b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, far6, header.ProtoUDP, 64, udp6(vm6, far6, 5000, 53, nil)))
	_, natPort, _ := out6(t, upp)
	b.r.Configure(modelOf(t, nat66Config))
	vmp.take() // DAD again where the interfaces joined anew
	upp.take()
	if len(b.r.links) != 1 {
		t.Fatalf("%d link states after the same config, want 1", len(b.r.links))
	}
	b.send(up, ip6Frame(macGateway, macUplink, far6, up6, header.ProtoUDP, 64, udp6(far6, up6, 53, natPort, nil)))
	if ip, _, dport := out6(t, vmp); ip.Dst() != vm6 || dport != 5000 {
		t.Fatalf("reply reached %x:%d after the reconfiguration", ip.Dst(), dport)
	}
	b.r.Configure(modelOf(t, strings.Replace(nat66Config, `<nat domain="lan" tcp-ports="2" udp-ports="10" icmp-ids="10"/>`, "", 1)))
	if len(b.r.links) != 0 || b.r.domains["up"].ports6[pUDP].InUse() != 0 {
		t.Fatalf("%d link states after NAT66 was taken away, want 0", len(b.r.links))
	}
}
