package router

import (
	"strings"
	"testing"

	"github.com/nicstack/nicstack/netdev/header"
)

// rulesConfig has one source domain "src" with rules of every kind toward domains d1..d5,
// each with one interface; no NAT, use_arp="no" so that nothing waits for ARP.
const rulesConfig = `<config>
  <policy label_prefix="d" domain="unused"/>
  <policy label="src" domain="src"/>
  <policy label_prefix="d1" domain="d1"/>
  <policy label_prefix="d2" domain="d2"/>
  <policy label_prefix="d3" domain="d3"/>
  <policy label_prefix="d4" domain="d4"/>
  <policy label_prefix="d5" domain="d5"/>
  <domain name="src" interface="10.0.0.1/24" use_arp="no">
    <tcp dst="192.168.0.0/16"><permit port="80" domain="d1"/><permit-any domain="d2"/></tcp>
    <tcp dst="192.168.1.0/24"><permit port="22" domain="d3"/></tcp>
    <tcp dst="10.0.0.0/8"><permit-any domain="d2"/></tcp>
    <udp dst="192.168.1.0/24"><permit port="53" domain="d1"/></udp>
    <icmp dst="192.168.0.0/16" domain="d4"/>
    <ip dst="192.168.0.0/16" domain="d5"/>
    <ip dst="192.168.2.0/24" domain="d1"/>
    <tcp-forward port="2222" domain="d3" to="192.168.3.3"/>
    <udp-forward port="69" domain="d3" to="192.168.3.3" to_port="6969"/>
  </domain>
  <domain name="unused" interface="10.9.0.1/24" use_arp="no"/>
  <domain name="d1" interface="192.168.1.254/24" gateway="192.168.1.1" use_arp="no"/>
  <domain name="d2" interface="192.168.2.254/24" gateway="192.168.2.1" use_arp="no"/>
  <domain name="d3" interface="192.168.3.254/24" gateway="192.168.3.1" use_arp="no"/>
  <domain name="d4" interface="192.168.4.254/24" gateway="192.168.4.1" use_arp="no"/>
  <domain name="d5" interface="192.168.5.254/24" gateway="192.168.5.1" use_arp="no"/>
</config>`

func TestRuleOrder(t *testing.T) {
	b := newBench(t, rulesConfig)
	src, srcp := b.attach("src", Nic, header.MAC{})
	ports := map[string]*fakePort{}
	for _, n := range []string{"d1", "d2", "d3", "d4", "d5"} {
		i, p := b.attach(n+"-session", Nic, header.MAC{})
		if i.Domain() != n {
			t.Fatalf("policy put %s-session into %q", n, i.Domain())
		}
		ports[n] = p
	}
	where := func() string {
		got := ""
		for n, p := range ports {
			if k := len(p.take()); k > 0 {
				if got != "" || k > 1 {
					t.Fatalf("frame went to several places")
				}
				got = n
			}
		}
		return got
	}
	s := ip4("10.0.0.2")
	tcp := func(dst string, port uint16) []byte {
		return tcpFrame(src.MAC(), routerMACNic, s, ip4(dst), 40000, port, header.TCPSyn, 1, 0, nil)
	}
	cases := []struct {
		name string
		f    []byte
		want string
	}{
		{"longest tcp prefix with matching permit", tcp("192.168.1.9", 22), "d3"},
		{"longest tcp prefix without permit falls to ip rules", tcp("192.168.1.9", 80), "d5"},
		{"permit-any before permit", tcp("192.168.7.9", 80), "d2"},
		{"udp permit", udpFrameT(src.MAC(), routerMACNic, s, ip4("192.168.1.9"), 1000, 53, nil), "d1"},
		{"udp without permit goes to ip rule", udpFrameT(src.MAC(), routerMACNic, s, ip4("192.168.1.9"), 1000, 54, nil), "d5"},
		{"icmp rule before ip rule", icmpEcho(src.MAC(), routerMACNic, s, ip4("192.168.2.9"), header.ICMPEchoRequest, 1, 1), "d4"},
		{"longest ip prefix", ethFrame(src.MAC(), routerMACNic, header.EtherTypeIPv4, ipPacket(47, s, ip4("192.168.2.9"), make([]byte, 8))), "d1"},
		{"other protocol by ip rule", ethFrame(src.MAC(), routerMACNic, header.EtherTypeIPv4, ipPacket(47, s, ip4("192.168.9.9"), make([]byte, 8))), "d5"},
		{"tcp-forward to router address", tcp("10.0.0.1", 2222), "d3"},
		{"router address without forward rule goes on to tcp rules", tcp("10.0.0.1", 2223), "d2"},
		{"forward rule before tcp rule", tcpFrame(src.MAC(), routerMACNic, s, ip4("10.0.0.1"), 40001, 2222, header.TCPSyn, 1, 0, nil), "d3"},
		{"no rule at all", tcp("172.16.0.1", 80), ""},
	}
	for _, c := range cases {
		b.send(src, c.f)
		if got := where(); got != c.want {
			t.Errorf("%s: went to %q, want %q", c.name, got, c.want)
		}
		// What no rule routes is answered with an ICMP host unreachable.
		back := srcp.take()
		if unreachable := len(back) == 1 && parse(t, back[0]).icmp != nil && parse(t, back[0]).icmp.Type() == header.ICMPDestUnreach; unreachable != (c.want == "") {
			t.Errorf("%s: %d frames back to the source", c.name, len(back))
		}
	}
	// udp-forward rewrites the destination address and port.
	b.send(src, udpFrameT(src.MAC(), routerMACNic, s, ip4("10.0.0.1"), 1000, 69, nil))
	out := ports["d3"].take()
	if len(out) != 1 {
		t.Fatal("udp-forward did not forward")
	}
	if p := parse(t, out[0]); p.dst() != ip4("192.168.3.3") || p.dport != 6969 || p.src() != s {
		t.Fatalf("udp-forward rewrite %v:%d from %v", p.dst(), p.dport, p.src())
	}
	// Domain-local traffic goes to the domain's other interfaces, not through rules.
	_, src2p := b.attach("src", Nic, header.MAC{})
	b.send(src, tcp("10.0.0.3", 80))
	if len(src2p.take()) != 1 || len(srcp.take()) != 0 || where() != "" {
		t.Fatal("domain-local traffic not sent to the other interface only")
	}
	// A link state beats the rules: a reply from d3's side for the link created above reaches
	// every interface of the client's domain (the router is a hub there).
	b.send(ifcByLabel(b.r, "d3-session"), tcpFrame(macServer, routerMACNic, ip4("192.168.1.9"), s, 22, 40000, header.TCPSyn|header.TCPAck, 9, 2, nil))
	if len(srcp.take()) != 1 || len(src2p.take()) != 1 {
		t.Fatal("reply through link state not delivered")
	}
}

func ifcByLabel(r *Router, label string) *Interface {
	for _, i := range r.ifs {
		if i.label == label {
			return i
		}
	}
	return nil
}

func TestPolicyScore(t *testing.T) {
	b := newBench(t, `<config>
  <default-policy domain="def"/>
  <policy label_prefix="vm" domain="short"/>
  <policy label_prefix="vm_1" domain="long"/>
  <policy label="vm_1 -> nic" domain="exact"/>
  <policy label_suffix="-> uplink" domain="suffix"/>
  <domain name="def" interface="10.0.0.1/24"/>
  <domain name="short" interface="10.0.1.1/24"/>
  <domain name="long" interface="10.0.2.1/24"/>
  <domain name="exact" interface="10.0.3.1/24"/>
  <domain name="suffix" interface="10.0.4.1/24"/>
</config>`)
	for label, want := range map[string]string{
		"vm_2 -> nic":    "short",
		"vm_1 -> x":      "long",
		"vm_1 -> nic":    "exact",
		"drv -> uplink":  "suffix",
		"something else": "def",
	} {
		if i, _ := b.attach(label, Nic, header.MAC{}); i.Domain() != want {
			t.Errorf("label %q: domain %q, want %q", label, i.Domain(), want)
		}
	}
}

func TestNicMACsAndChurn(t *testing.T) {
	b := newBench(t, natConfig)
	seen := map[header.MAC]bool{}
	var ifs []*Interface
	for k := 0; k < 300; k++ {
		i, _ := b.attach("vm", Nic, header.MAC{})
		if seen[i.MAC()] || i.MAC() == routerMACNic {
			t.Fatalf("duplicate MAC %s", i.MAC())
		}
		seen[i.MAC()] = true
		ifs = append(ifs, i)
	}
	if ifs[0].MAC() != (header.MAC{2, 2, 2, 2, 2, 1}) {
		t.Fatalf("first client MAC %s", ifs[0].MAC())
	}
	for _, i := range ifs {
		b.r.Detach(i)
	}
	if len(b.r.ifs) != 0 || len(b.r.macs) != 0 || len(b.r.domains["default"].ifs) != 0 {
		t.Fatal("detach leaks interfaces or MACs")
	}
}

// <ip> rules route both ways only when both domains have one, and change nothing above
// Ethernet.
func TestIPRulesBothWays(t *testing.T) {
	cfg := `<config>
  <policy label="a" domain="a"/><policy label="b" domain="b"/>
  <domain name="a" interface="10.0.1.1/24" use_arp="no"><ip dst="10.0.2.0/24" domain="b"/></domain>
  <domain name="b" interface="10.0.2.1/24" use_arp="no">BACK</domain>
</config>`
	for _, back := range []bool{false, true} {
		c := strings.Replace(cfg, "BACK", "", 1)
		if back {
			c = strings.Replace(cfg, "BACK", `<ip dst="10.0.1.0/24" domain="a"/>`, 1)
		}
		b := newBench(t, c)
		a, ap := b.attach("a", Nic, header.MAC{})
		bi, bp := b.attach("b", Nic, header.MAC{})
		f := udpFrameT(a.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("10.0.2.2"), 1000, 2000, []byte("x"))
		b.send(a, f)
		out := bp.take()
		if len(out) != 1 || string(out[0][header.EthLen:]) != string(f[header.EthLen:]) {
			t.Fatal("<ip> rule changed the IP packet or did not route it")
		}
		b.send(bi, udpFrameT(bi.MAC(), routerMACNic, ip4("10.0.2.2"), ip4("10.0.1.2"), 2000, 1000, nil))
		if got := len(ap.take()); (got == 1) != back {
			t.Fatalf("reply with back rule %v: %d frames (an <ip> rule makes no link state)", back, got)
		}
	}
}
