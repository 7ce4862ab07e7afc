package router

import (
	"strings"
	"testing"

	"github.com/nicstack/nicstack/netdev/header"
)

func TestInvalidDomainPropagates(t *testing.T) {
	cfg := `<config verbose="yes"><!-- problems expected -->
  <default-policy domain="a"/>
  <domain name="a" interface="10.0.1.1/24"><ip dst="10.0.2.0/24" domain="b"/></domain>
  <domain name="b" interface="10.0.2.1/24"><tcp-forward port="60000" domain="c" to="10.0.3.2"/></domain>
  <domain name="c" interface="10.0.3.1/24"><nat domain="a" tcp-ports="5"/></domain>
  <domain name="d" interface="10.0.4.1/24" gateway="10.9.9.9"/>
  <domain name="e">
    <dhcp-server ip_first="10.0.5.2" ip_last="10.0.5.3"/>
  </domain>
  <domain name="f" interface="10.0.6.1/24">
    <dhcp-server ip_first="10.0.6.1" ip_last="10.0.6.3"/>
  </domain>
  <domain name="g" interface="10.0.7.1/24"><udp dst="0.0.0.0/0"><permit port="0" domain="g"/></udp></domain>
  <domain name="ok" interface="10.0.8.1/24"><icmp dst="0.0.0.0/0" domain="ok"/></domain>
  <domain name="ok" interface="10.0.9.1/24"/>
  <domain name="h" interface="10.0.10.1/24" bogus="1"/>
</config>`
	b := newBench(t, cfg)
	// b: forward port above 49151; a refers to b; c's NAT names a, which is now invalid.
	want := map[string]string{
		"b":  "port 60000 is above 49151",
		"a":  `unknown or invalid domain "b"`,
		"c":  `unknown or invalid domain "a"`,
		"d":  "gateway 10.9.9.9 is not in the subnet",
		"e":  "cannot be a DHCP server too",
		"f":  "covers the router's address",
		"g":  "missing or zero port",
		"ok": "name not unique",
	}
	for name, why := range want {
		found := false
		for _, inv := range b.r.cfg.Invalid {
			if inv.Name == name && strings.Contains(inv.Reason, why) {
				found = true
			}
		}
		if !found {
			t.Errorf("domain %s not invalid with %q; invalid: %+v", name, why, b.r.cfg.Invalid)
		}
		if b.r.domains[name] != nil {
			t.Errorf("invalid domain %s still in use", name)
		}
	}
	if b.r.domains["h"] == nil {
		t.Error("an unknown attribute must only warn")
	}
	if !strings.Contains(b.log.String(), `invalid domain`) || !strings.Contains(b.log.String(), "above 49151") {
		t.Errorf("no log line saying why:\n%s", b.log.String())
	}
	// Sessions whose policy names an invalid domain get none; their frames are dropped.
	i, _ := b.attach("x", Nic, header.MAC{})
	if i.Domain() != "" || i.LinkUp() {
		t.Fatal("interface in an invalid domain")
	}
	if b.send(i, udpFrameT(i.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("10.0.2.2"), 1, 2, nil)); b.r.Stats().Dropped.Load() != 1 {
		t.Fatal("frame from an interface without domain not dropped")
	}
}

func TestReconfigureKeepsAllowedLinks(t *testing.T) {
	b, vm, vmp, up, upp := natBench(t)
	udp := func(dport uint16) int {
		b.send(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, dport, nil))
		return len(upp.take())
	}
	tcp := func() int {
		b.send(vm, tcpFrame(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 6000, 443, header.TCPSyn, 1, 0, nil))
		return len(upp.take())
	}
	if udp(53) != 1 || tcp() != 1 {
		t.Fatal("setup flows not routed")
	}
	b.send(vm, icmpEcho(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), header.ICMPEchoRequest, 7, 1))
	if len(upp.take()) != 1 {
		t.Fatal("echo not routed")
	}
	// New config: UDP still allowed, TCP no longer.
	m := modelOf(t, strings.Replace(natConfig,
		`<tcp dst="0.0.0.0/0"><permit-any domain="uplink"/></tcp>`, `<tcp dst="0.0.0.0/0"><permit port="22" domain="uplink"/></tcp>`, 1))
	if len(m.Problems) != 0 {
		t.Fatal(m.Problems)
	}
	b.r.Configure(m)
	if len(b.r.links) != 2 {
		t.Fatalf("%d links after reconfiguration, want the UDP and the ICMP one", len(b.r.links))
	}
	b.send(up, icmpEcho(macGateway, macUplink, ip4("198.18.1.1"), ip4("198.18.0.10"), header.ICMPEchoReply, 49152, 1))
	if out := vmp.take(); len(out) != 1 || parse(t, out[0]).icmp.ID() != 7 {
		t.Fatal("kept echo link state lost its NAT mapping")
	}
	// The UDP reply still comes back through the kept NAT mapping.
	b.send(up, udpFrameT(macGateway, macUplink, ip4("198.18.1.1"), ip4("198.18.0.10"), 53, 49152, nil))
	if len(vmp.take()) != 1 {
		t.Fatal("kept link state lost its NAT mapping")
	}
	if tcp() != 0 {
		t.Fatal("forbidden TCP flow still routed")
	}
	if vm.Domain() != "default" || !vm.LinkUp() {
		t.Fatal("interface not re-attached")
	}
	// ARP cache survived: the UDP flow did not wait.
	if udp(53) != 1 {
		t.Fatal("flow waits after reconfiguration")
	}
	// Quota accounting carried over: one more UDP flow fits (quota 2), the next does not.
	if udp(54) != 1 || udp(55) != 0 {
		t.Fatal("NAT quota accounting wrong after reconfiguration")
	}
	// Removing NAT changes the flow's translation: the link goes.
	b.r.Configure(modelOf(t, strings.Replace(natConfig, `<nat domain="default" tcp-ports="2" udp-ports="2" icmp-ids="2"/>`, ``, 1)))
	if len(b.r.links) != 0 {
		t.Fatal("links with NAT kept although the new config has no NAT")
	}
}
