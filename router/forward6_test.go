package router

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/region"
)

// forward6Config forwards TCP port 80 of the uplink's IPv6 address to the VM's 8080 and
// UDP 53 to its 53, beside an IPv4 forward of the same TCP port; the VM's replies pass by
// the link states alone.
const forward6Config = `<config verbose_packet_drop="yes">
  <policy label_prefix="vm" domain="lan"/> <policy label="up" domain="up"/>
  <domain name="lan" interface="10.0.1.1/24" interface_ipv6="2001:db8:1::1/64"/>
  <domain name="up" interface="198.18.0.10/24" interface_ipv6="2001:db8:2::2/64" gateway_ipv6="fe80::1">
    <tcp-forward port="80" domain="lan" to="10.0.1.5"/>
    <tcp-forward port="80" domain="lan" to="2001:db8:1::5" to_port="8080"/>
    <udp-forward port="53" domain="lan" to="2001:db8:1::5"/>
  </domain>
</config>`

// A TCP connection and a UDP exchange to the uplink's IPv6 address reach the VM at the
// forwarded address and port, the client's address kept; the answers leave from the
// uplink's address and port; every transport checksum holds. With <nat> for up in the lan,
// the VM sees the lan's address instead of the client's, as IPv4's forward with NAT.
func TestIPv6PortForward(t *testing.T) {
	for _, natted := range []bool{false, true} {
		cfg := forward6Config
		if natted {
			cfg = strings.Replace(cfg, `interface_ipv6="2001:db8:1::1/64"/>`,
				`interface_ipv6="2001:db8:1::1/64"><nat domain="up" tcp-ports="4" udp-ports="4"/></domain>`, 1)
		}
		b, vm, vmp, up, upp := nat66Bench(t, cfg, nil, nil)
		client := far6
		if natted {
			client = router6
		}
		b.send(up, ip6Frame(macGateway, macUplink, far6, up6, header.ProtoTCP, 64, tcp6(far6, up6, 4000, 80, header.TCPSyn, nil)))
		ip, sport, dport := out6(t, vmp)
		if ip.Dst() != vm6 || dport != 8080 || ip.Src() != client || natted == (sport == 4000) || ip.HopLimit() != 63 {
			t.Fatalf("nat %v: SYN reached %x:%d from %x:%d", natted, ip.Dst(), dport, ip.Src(), sport)
		}
		b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, client, header.ProtoTCP, 64, tcp6(vm6, client, 8080, sport, header.TCPSyn|header.TCPAck, nil)))
		if ip, s, d := out6(t, upp); ip.Src() != up6 || s != 80 || ip.Dst() != far6 || d != 4000 {
			t.Fatalf("nat %v: SYN-ACK left from %x:%d to %x:%d", natted, ip.Src(), s, ip.Dst(), d)
		}
		b.send(up, ip6Frame(macGateway, macUplink, far6, up6, header.ProtoUDP, 64, udp6(far6, up6, 5353, 53, []byte("query"))))
		ip, sport, dport = out6(t, vmp)
		if ip.Dst() != vm6 || dport != 53 || ip.Src() != client {
			t.Fatalf("nat %v: UDP reached %x:%d from %x", natted, ip.Dst(), dport, ip.Src())
		}
		b.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, client, header.ProtoUDP, 64, udp6(vm6, client, 53, sport, []byte("answer"))))
		if ip, s, d := out6(t, upp); ip.Src() != up6 || s != 53 || d != 5353 {
			t.Fatalf("nat %v: UDP answer left from %x:%d to port %d", natted, ip.Src(), s, d)
		}
		// A port no rule forwards is still unreachable, and IPv4's forward of port 80 is
		// IPv4's alone.
		b.send(up, ip6Frame(macGateway, macUplink, far6, up6, header.ProtoTCP, 64, tcp6(far6, up6, 4000, 81, header.TCPSyn, nil)))
		if _, _, m := sent6(t, upp.take()[0]); m == nil || m.Type() != header.ICMPv6DestUnreach || m.Code() != header.ICMPv6PortUnreachable {
			t.Fatal("TCP to an unforwarded port not answered with port unreachable")
		}
		if len(b.r.links) != 2 {
			t.Fatalf("%d link states, want 2", len(b.r.links))
		}
	}
}

// A forwarded IPv6 link survives a restart on the state region (the server's address and
// port come from the rule again) and a reconfiguration with the same rule; one without the
// rule lets it go.
func TestIPv6PortForwardKept(t *testing.T) {
	mem := make([]byte, region.Size(64))
	b, _, vmp, up, _ := nat66Bench(t, forward6Config, mem, nil)
	b.send(up, ip6Frame(macGateway, macUplink, far6, up6, header.ProtoTCP, 64, tcp6(far6, up6, 4000, 80, header.TCPSyn, nil)))
	out6(t, vmp)
	before := keptState(b.r)
	b2, vm, _, _, upp := nat66Bench(t, forward6Config, bytes.Clone(mem), b.clock)
	if got := keptState(b2.r); got != before || len(b2.r.links) != 1 {
		t.Fatalf("restarted with\n%s\nhad\n%s\nlog:\n%s", got, before, b2.log)
	}
	b2.send(vm, ip6Frame(vm.MAC(), routerMACNic, vm6, far6, header.ProtoTCP, 64, tcp6(vm6, far6, 8080, 4000, header.TCPSyn|header.TCPAck, nil)))
	if ip, s, _ := out6(t, upp); ip.Src() != up6 || s != 80 {
		t.Fatalf("SYN-ACK left from %x:%d after the restart", ip.Src(), s)
	}
	b2.r.Configure(modelOf(t, forward6Config))
	if len(b2.r.links) != 1 {
		t.Fatal("the forwarded link lost by the same config")
	}
	b2.r.Configure(modelOf(t, strings.Replace(forward6Config, `to_port="8080"`, `to_port="8081"`, 1)))
	if len(b2.r.links) != 0 {
		t.Fatal("the forwarded link kept by a config that forwards elsewhere")
	}
}
