package router

import (
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
)

func TestUDPThroughNATAndBack(t *testing.T) {
	b, vm, vmp, up, upp := natBench(t)
	f := udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, []byte("query"))
	if v := b.send(vm, f); v != Done {
		t.Fatalf("verdict %v", v)
	}
	out := upp.take()
	if len(out) != 1 {
		t.Fatalf("uplink got %d frames", len(out))
	}
	p := parse(t, out[0])
	if p.eth.Src() != macUplink || p.eth.Dst() != macGateway {
		t.Fatalf("eth %s > %s", p.eth.Src(), p.eth.Dst())
	}
	if p.src() != ip4("198.18.0.10") || p.dst() != ip4("198.18.1.1") || p.sport != 49152 || p.dport != 53 {
		t.Fatalf("NAT rewrite wrong: %v:%d > %v:%d", p.src(), p.sport, p.dst(), p.dport)
	}
	b.r.Flush()
	if upp.flushes != 1 || vmp.flushes != 0 {
		t.Fatalf("flushes uplink %d vm %d", upp.flushes, vmp.flushes)
	}
	reply := udpFrameT(macGateway, macUplink, ip4("198.18.1.1"), ip4("198.18.0.10"), 53, 49152, []byte("answer"))
	b.send(up, reply)
	out = vmp.take()
	if len(out) != 1 {
		t.Fatalf("vm got %d frames", len(out))
	}
	p = parse(t, out[0])
	if p.eth.Src() != routerMACNic || p.eth.Dst() != vm.MAC() {
		t.Fatalf("eth %s > %s", p.eth.Src(), p.eth.Dst())
	}
	if p.src() != ip4("198.18.1.1") || p.dst() != ip4("10.0.1.2") || p.sport != 53 || p.dport != 5000 {
		t.Fatalf("reverse rewrite wrong: %v:%d > %v:%d", p.src(), p.sport, p.dst(), p.dport)
	}
	// A packet to a NAT port without link state is dropped.
	b.send(up, udpFrameT(macGateway, macUplink, ip4("198.18.1.1"), ip4("198.18.0.10"), 53, 49153, nil))
	if len(vmp.take()) != 0 {
		t.Fatal("packet without link state passed")
	}
}

func TestNATQuotaExhaustion(t *testing.T) {
	b, vm, _, _, upp := natBench(t)
	flow := func(sport uint16) int {
		b.send(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), sport, 53, nil))
		return len(upp.take())
	}
	if flow(1) != 1 || flow(2) != 1 {
		t.Fatal("flows within the quota of 2 were not routed")
	}
	if flow(3) != 0 {
		t.Fatal("the quota+1st flow was routed")
	}
	if got := b.r.Stats().NATRefused.Load(); got != 1 {
		t.Fatalf("NATRefused %d, want 1", got)
	}
	// Existing flows keep working at the quota.
	if flow(1) != 1 {
		t.Fatal("existing flow broken at quota")
	}
	// After the UDP idle timeout (30 s) the ports are free again.
	b.clock.advance(31 * time.Second)
	b.r.Tick()
	if flow(3) != 1 {
		t.Fatal("flow refused after the old link states timed out")
	}
	if n := b.r.domains["uplink"].ports[pUDP].InUse(); n != 1 {
		t.Fatalf("ports in use %d, want 1", n)
	}
}

func TestNATPortSpaceSharedAcrossDomains(t *testing.T) {
	b := newBench(t, `<config>
  <policy label="a" domain="a"/><policy label="c" domain="c"/><policy label="up" domain="up"/>
  <domain name="up" interface="198.18.0.10/24" use_arp="no">
    <nat domain="a" udp-ports="1"/>
    <nat domain="c" udp-ports="1"/>
  </domain>
  <domain name="a" interface="10.0.1.1/24" use_arp="no"><udp dst="0.0.0.0/0"><permit-any domain="up"/></udp></domain>
  <domain name="c" interface="10.0.2.1/24" use_arp="no"><udp dst="0.0.0.0/0"><permit-any domain="up"/></udp></domain>
</config>`)
	a, _ := b.attach("a", Nic, header.MAC{})
	c, _ := b.attach("c", Nic, header.MAC{})
	_, upp := b.attach("up", Uplink, macUplink)
	b.send(a, udpFrameT(a.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.0.7"), 1, 9, nil))
	b.send(c, udpFrameT(c.MAC(), routerMACNic, ip4("10.0.2.2"), ip4("198.18.0.7"), 1, 9, nil))
	out := upp.take()
	if len(out) != 2 {
		t.Fatalf("got %d frames", len(out))
	}
	if p0, p1 := parse(t, out[0]), parse(t, out[1]); p0.sport == p1.sport {
		t.Fatal("two domains got the same NAT port")
	} else if p0.eth.Dst() != macUplink {
		t.Fatal("use_arp=no must send to the interface's own MAC")
	}
	// Each domain's quota is its own: a's second flow is refused, c's flows are not affected.
	b.send(a, udpFrameT(a.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.0.7"), 2, 9, nil))
	if len(upp.take()) != 0 {
		t.Fatal("a exceeded its quota")
	}
}

func TestICMPEchoThroughNAT(t *testing.T) {
	b, vm, vmp, up, upp := natBench(t)
	b.send(vm, icmpEcho(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), header.ICMPEchoRequest, 77, 1))
	out := upp.take()
	if len(out) != 1 {
		t.Fatalf("uplink got %d", len(out))
	}
	p := parse(t, out[0])
	if p.src() != ip4("198.18.0.10") || p.icmp.ID() != 49152 {
		t.Fatalf("echo not translated: %v id %d", p.src(), p.icmp.ID())
	}
	b.send(up, icmpEcho(macGateway, macUplink, ip4("198.18.1.1"), ip4("198.18.0.10"), header.ICMPEchoReply, 49152, 1))
	out = vmp.take()
	if len(out) != 1 {
		t.Fatalf("vm got %d", len(out))
	}
	p = parse(t, out[0])
	if p.dst() != ip4("10.0.1.2") || p.icmp.ID() != 77 || p.icmp.Type() != header.ICMPEchoReply {
		t.Fatalf("reply not translated back: %v id %d", p.dst(), p.icmp.ID())
	}
}

func TestICMPErrorCarryingNATedFlow(t *testing.T) {
	b, vm, vmp, up, upp := natBench(t)
	b.send(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, []byte("q")))
	sent := upp.take()[0]
	// The gateway answers port unreachable, quoting the translated packet.
	quoted := sent[header.EthLen : header.EthLen+28]
	m := make([]byte, 8+len(quoted))
	m[0], m[1] = header.ICMPDestUnreach, 3
	copy(m[8:], quoted)
	header.ICMP(m).UpdateChecksum()
	b.send(up, ethFrame(macGateway, macUplink, header.EtherTypeIPv4, ipPacket(header.ProtoICMP, ip4("198.18.0.1"), ip4("198.18.0.10"), m)))
	out := vmp.take()
	if len(out) != 1 {
		t.Fatalf("vm got %d frames", len(out))
	}
	p := parse(t, out[0])
	// The outer packet keeps its sender, the gateway that reported it (as in Genode: only the
	// router's own address is translated there).
	if p.icmp.Type() != header.ICMPDestUnreach || p.dst() != ip4("10.0.1.2") || p.src() != ip4("198.18.0.1") {
		t.Fatalf("outer header not translated: %v > %v", p.src(), p.dst())
	}
	in := header.IPv4(p.icmp.Body())
	if in.Src() != ip4("10.0.1.2") || in.Dst() != ip4("198.18.1.1") {
		t.Fatalf("embedded addresses %v > %v", in.Src(), in.Dst())
	}
	if header.Checksum(in.Header(), 0) != 0 {
		t.Fatal("embedded IPv4 checksum broken")
	}
	ports := header.Ports(p.icmp.Body()[20:])
	if ports.Src() != 5000 || ports.Dst() != 53 {
		t.Fatalf("embedded ports %d > %d", ports.Src(), ports.Dst())
	}
	// An error about a packet no link state knows goes nowhere (no <ip> rule in uplink).
	m2 := append([]byte(nil), m...)
	header.Ports(m2[8+20:]).SetDst(49999)
	header.ICMP(m2).UpdateChecksum()
	b.send(up, ethFrame(macGateway, macUplink, header.EtherTypeIPv4, ipPacket(header.ProtoICMP, ip4("198.18.0.1"), ip4("198.18.0.10"), m2)))
	if len(vmp.take()) != 0 {
		t.Fatal("unrelated ICMP error forwarded")
	}
}

// A flood of new TCP, UDP and ICMP flows through NAT uses up the quotas and is refused and
// counted, while an established ping keeps working.
func TestFloodDoesNotStarveEstablishedFlow(t *testing.T) {
	b, vm, vmp, up, upp := natBench(t)
	ping := func(seq uint16) bool {
		b.send(vm, icmpEcho(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), header.ICMPEchoRequest, 1, seq))
		out := upp.take()
		if len(out) != 1 {
			return false
		}
		id := parse(t, out[0]).icmp.ID()
		b.send(up, icmpEcho(macGateway, macUplink, ip4("198.18.1.1"), ip4("198.18.0.10"), header.ICMPEchoReply, id, seq))
		return len(vmp.take()) == 1
	}
	if !ping(1) {
		t.Fatal("ping before the flood")
	}
	for k := 0; k < 1000; k++ {
		dst := [4]byte{203, 0, byte(k >> 8), byte(k)}
		b.send(vm, tcpFrame(vm.MAC(), routerMACNic, ip4("10.0.1.2"), dst, uint16(k), 80, header.TCPSyn, 1, 0, nil))
		b.send(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), dst, uint16(k), 53, nil))
		b.send(vm, icmpEcho(vm.MAC(), routerMACNic, ip4("10.0.1.2"), dst, header.ICMPEchoRequest, uint16(k+2), 1))
		upp.take()
		if k%100 == 0 && !ping(uint16(k)) {
			t.Fatalf("ping lost during the flood at %d", k)
		}
	}
	upp.take()
	// Quotas 2/2/2: two TCP, two UDP and one more ICMP (the ping holds one) got through.
	if got := b.r.Stats().NATRefused.Load(); got != 3*1000-5 {
		t.Fatalf("refused %d, want %d", got, 3*1000-5)
	}
	if !ping(9999) {
		t.Fatal("ping after the flood")
	}
}

// A client that crashes and restarts keeps its NAT mappings: Orphan hands its link states to
// the next session with its label, whose flows leave on the same NAT ports and whose replies
// reach it; a plain Detach dissolves them, and the flow gets a new port.
func TestOrphanedLinksPassToTheNextSession(t *testing.T) {
	b, vm, _, up, upp := natBench(t)
	flow := func(vm *Interface) uint16 {
		t.Helper()
		b.send(vm, arpFrame(header.ARPReply, vm.MAC(), ip4("10.0.1.2"), routerMACNic, ip4("10.0.1.1"), routerMACNic))
		b.send(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, nil))
		out := upp.take()
		if len(out) != 1 {
			t.Fatalf("uplink got %d frames", len(out))
		}
		return parse(t, out[0]).sport
	}
	first := flow(vm)
	b.r.Orphan(vm)
	vm2, vmp2 := b.attach("vm", Nic, header.MAC{})
	if p := flow(vm2); p != first {
		t.Fatalf("after Orphan the flow left on NAT port %d, want %d", p, first)
	}
	vmp2.take()
	b.send(up, udpFrameT(macGateway, macUplink, ip4("198.18.1.1"), ip4("198.18.0.10"), 53, first, []byte("answer")))
	if n := len(vmp2.take()); n != 1 {
		t.Fatalf("the reply reached the next session %d times, want once", n)
	}
	b.r.Detach(vm2)
	vm3, _ := b.attach("vm", Nic, header.MAC{})
	if p := flow(vm3); p == first {
		t.Fatalf("after Detach the flow kept NAT port %d", p)
	}
}
