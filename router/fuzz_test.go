package router

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/region"
)

// FuzzRouterFrame feeds any bytes as frames from any interface: the input is a sequence of
// records (interface byte, flag byte, length byte, frame bytes) so that one input can open a
// link state and then hit it. Nothing may panic, what the router keeps (held frames, link
// states, neighbours) stays bounded, IPv4 and IPv6 alike, a router without its fast path (forwardLinked) does exactly the same
// with every frame, and a router restarted on the state region finds what the router had.
func FuzzRouterFrame(f *testing.F) {
	vmMAC := header.MAC{2, 2, 2, 2, 2, 1}
	seed := func(ifc byte, frames ...[]byte) []byte {
		var out []byte
		for _, fr := range frames {
			if len(fr) > 255 {
				fr = fr[:255]
			}
			out = append(out, ifc, 0, byte(len(fr)))
			out = append(out, fr...)
		}
		return out
	}
	f.Add(seed(0, udpFrameT(vmMAC, routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, []byte("q"))))
	f.Add(seed(0, dhcpRequest(vmMAC, header.DHCPDiscover, 1, [4]byte{})))
	f.Add(seed(1, arpFrame(header.ARPReply, macGateway, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink)))
	f.Add(seed(0, tcpFrame(vmMAC, routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 4000, 80, header.TCPSyn, 1, 0, nil)))
	f.Add(seed(0, icmpEcho(vmMAC, routerMACNic, ip4("10.0.1.2"), ip4("10.0.1.1"), header.ICMPEchoRequest, 1, 1)))
	f.Add(seed(1, tcpFrame(macGateway, macUplink, ip4("198.18.1.1"), ip4("198.18.0.10"), 5, 80, header.TCPSyn, 1, 0, nil)))
	seedFlow := udpFrameT(vmMAC, routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, []byte("q"))
	f.Add(append(seed(0, seedFlow, seedFlow, seedFlow), seed(1, udpFrameT(macGateway, macUplink, ip4("198.18.1.1"), ip4("198.18.0.10"), 53, 49152, []byte("a")))...))
	// IPv6: the VM's NS, RS and echo, a routed UDP packet, the gateway's NA, hostile chains.
	vm6, far6, up6 := addr6("2001:db8:1::5"), addr6("2001:db8:9::9"), addr6("2001:db8:2::2")
	ns := ndpFrame(vmMAC, routerMACNic, func(p []byte) header.NDPBuilder {
		w := header.StartNS(p, vm6, header.SolicitedNode(router6), router6)
		w.LinkAddr(header.NDPOptSourceLinkAddr, vmMAC)
		return w
	})
	f.Add(seed(0, ns))
	f.Add(seed(0, ndpFrame(vmMAC, routerMACNic, func(p []byte) header.NDPBuilder { return header.StartRS(p, [16]byte{}, header.AllRouters) })))
	f.Add(seed(0, ip6Frame(vmMAC, routerMACNic, vm6, router6, header.ProtoICMPv6, 64, echo6(vm6, router6, 8))))
	routed := ip6Frame(vmMAC, routerMACNic, vm6, far6, header.ProtoUDP, 64, udp6(vm6, far6, 5000, 53, []byte("q")))
	na := ndpFrame(macGateway, macUplink, func(p []byte) header.NDPBuilder {
		w := header.StartNA(p, gwLL6, up6, gwLL6, header.NASolicit)
		w.LinkAddr(header.NDPOptTargetLinkAddr, macGateway)
		return w
	})
	f.Add(append(seed(0, ns, routed, routed), seed(1, na)...))
	// NAT66: a flow out, the gateway's NA, the reply to the NAT port, an ICMPv6 error about it.
	reply := ip6Frame(macGateway, macUplink, far6, up6, header.ProtoUDP, 64, udp6(far6, up6, 53, 49152, []byte("a")))
	quote := ip6Frame(macUplink, macGateway, up6, far6, header.ProtoUDP, 63, udp6(up6, far6, 49152, 53, []byte("q")))[header.EthLen:]
	e := make([]byte, header.IPv6Len+header.ICMPv6Len+len(quote))
	e = e[:header.PutICMPv6Error(e, header.ICMPv6DestUnreach, header.ICMPv6PortUnreachable, 0, far6, up6, quote)]
	f.Add(append(append(seed(1, na), seed(0, ns, routed)...), seed(1, reply, ethFrame(macGateway, macUplink, header.EtherTypeIPv6, e))...))
	f.Add(seed(0, ip6Frame(vmMAC, routerMACNic, vm6, far6, header.ProtoRouting, 64, append([]byte{header.ProtoUDP, 0, 0, 1, 0, 0, 0, 0}, udp6(vm6, far6, 1, 2, nil)...))))
	f.Add(seed(0, ip6Frame(vmMAC, routerMACNic, vm6, far6, header.ProtoFragment, 64, append([]byte{header.ProtoUDP, 0, 0, 1, 0, 0, 0, 9}, udp6(vm6, far6, 1, 2, nil)...))))
	// IPv6 port forwarding: a SYN from the far end to the uplink's forwarded port.
	f.Add(append(seed(1, na), seed(1, ip6Frame(macGateway, macUplink, far6, up6, header.ProtoTCP, 64, tcp6(far6, up6, 4000, 80, header.TCPSyn, nil)))...))
	// RAs and DHCPv6 at a domain that takes neither: dropped.
	f.Add(seed(1, upstreamRA(goodRA), dhcp6Reply(1, gwLL6, 0)))
	cfg := strings.Replace(natConfig, `verbose_packet_drop="yes"`, ``, 1)
	cfg = strings.Replace(cfg, `gateway="198.18.0.1">`, `gateway="198.18.0.1" interface_ipv6="2001:db8:2::2/64" gateway_ipv6="fe80::1">
    <ip dst="2001:db8:1::/64" domain="default"/> <tcp-forward port="80" domain="default" to="2001:db8:1::5"/>`, 1)
	cfg = strings.Replace(cfg, `<domain name="default" interface="10.0.1.1/24">`, `<domain name="default" interface="10.0.1.1/24" interface_ipv6="2001:db8:1::1/64">
    <udp dst="::/0"><permit-any domain="uplink"/></udp> <icmp dst="::/0" domain="uplink"/> <ra max_interval_sec="4"/>`, 1)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzFrames(t, cfg, data, true) })
}

// fuzzFrames is FuzzRouterFrame's body on cfg, whose domains the policies of natConfig
// select ("vm" and "uplink"); restart: check that a router restarted on the state region
// finds what the router had.
func fuzzFrames(t *testing.T, cfg string, data []byte, restart bool) {
	mem := make([]byte, region.Size(256))
	p := newPairedBench(t, cfg, mem, "vm", "uplink")
	p.handle(t, 1, arpFrame(header.ARPReply, macGateway, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink), nil, "gateway ARP reply")
	for n := 0; len(data) >= 3; n++ {
		k, flags, size := int(data[0])%2, data[1], int(data[2])
		data = data[3:]
		size = min(size, len(data))
		frame := data[:size]
		data = data[size:]
		var off *netdev.Offload // none, as most frames come
		if flags&1 != 0 {
			off = &netdev.Offload{Flags: netdev.OffloadNeedsCsum}
		}
		p.handle(t, k, frame, off, fmt.Sprintf("record %d", n))
		if flags&2 != 0 {
			for _, b := range []*bench{p.fast, p.general} {
				b.clock.advance(1e9 * 5)
				b.r.Tick()
			}
		}
	}
	r := p.fast.r
	if len(r.links) > maxLinksPerInterface*2 {
		t.Fatalf("%d link states", len(r.links))
	}
	held := map[*Interface]int{}
	for _, w := range r.waiters {
		for _, f := range w.frames {
			held[f.from] += len(f.frame)
		}
	}
	for _, i := range p.fastIfs {
		if held[i] != i.heldBytes {
			t.Fatalf("%s holds %d bytes, counts %d", i.label, held[i], i.heldBytes)
		}
	}
	for _, d := range r.domains {
		if len(d.arp) > maxARPEntries || len(d.nd) > maxARPEntries {
			t.Fatalf("%d ARP entries, %d neighbours", len(d.arp), len(d.nd))
		}
	}
	if restart && !r.keepFull {
		restarted := keptBench(t, cfg, bytes.Clone(mem), p.fast.clock)
		if got, want := keptState(restarted.r), keptState(r); got != want {
			t.Fatalf("restarted on the state region with\n%s\nthe router had\n%s", got, want)
		}
	}
	for k := range p.fastIfs {
		r.Detach(p.fastIfs[k])
	}
	if len(r.waiters) != 0 || len(r.links) != 0 {
		t.Fatal("held frames or link states left after detaching everything")
	}
}
