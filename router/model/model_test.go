package model

import (
	"testing"

	"github.com/nicstack/nicstack/runtime/config"
)

func parseXML(t *testing.T, s string) *config.Node {
	t.Helper()
	n, err := config.ParseXML("test", []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestParseDefaultsAndSchema(t *testing.T) {
	c, errs := Parse(parseXML(t, `<config><domain name="x" interface="10.0.0.1/24"><nat domain="x" tcp-ports="3"/></domain></config>`))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if c.MaxPacketsPerSignal != 50 || c.TCPIdleTimeout.Seconds() != 600 || c.UDPIdleTimeout.Seconds() != 30 ||
		c.ICMPIdleTimeout.Seconds() != 10 || c.TCPMaxSegmLifetime.Seconds() != 15 || c.ARPRequestTimeout.Seconds() != 10 ||
		c.DHCPOfferTimeout.Seconds() != 10 || !c.ICMPEchoServer || c.ICMPType3CodeOnFragm != -1 {
		t.Fatalf("defaults %+v", c)
	}
	d := c.Domains["x"]
	if !d.UseARP || !d.ICMPEchoServer || d.NAT["x"].TCPPorts != 3 || d.NAT["x"].UDPPorts != 0 {
		t.Fatalf("domain defaults %+v", d)
	}
	// Every attribute the parser reads is in the schema, spelled as Genode spells it.
	s := RouterSchema()
	dom := s.Node("domain")
	for _, a := range []string{"tcp-ports", "udp-ports", "icmp-ids"} {
		if _, ok := dom.Node("nat").Attr(a); !ok {
			t.Errorf("schema lacks nat %s", a)
		}
	}
	for _, a := range []string{"ip_first", "ip_last", "ip_lease_time_sec", "dns_config_from"} {
		if _, ok := dom.Node("dhcp-server").Attr(a); !ok {
			t.Errorf("schema lacks dhcp-server %s", a)
		}
	}
	if _, ok := dom.Node("tcp-forward").Attr("to_port"); !ok {
		t.Error("schema lacks to_port")
	}
	_, errs = Parse(parseXML(t, `<config tcp_idle="1"><domian name="x"/><domain name="y" interface="10.0.0.1/24" use_arp="perhaps"/></config>`))
	if len(errs) != 3 {
		t.Fatalf("want 3 problems (unknown attribute, unknown node, bad boolean), got %v", errs)
	}
}

// The router picks a session's domain with the one matcher (runtime/label), so a Genode
// config's policies select as they do in Genode; label_last is init's, not a policy's.
func TestPolicySelection(t *testing.T) {
	c, errs := Parse(parseXML(t, `<config>
		<policy label_prefix="vm" domain="short"/> <policy label_prefix="vm_1" domain="long"/>
		<policy label="vm_1 -> " domain="exact"/> <policy label_suffix=" -> uplink" domain="uplink"/>
		<default-policy domain="def"/>
		<domain name="short"/> <domain name="long"/> <domain name="exact"/> <domain name="uplink"/> <domain name="def"/>
	</config>`))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	for label, want := range map[string]string{
		"vm_2 -> ": "short", "vm_1 -> x": "long", "vm_1 -> ": "exact", "vm_1 -> uplink": "long",
		"drv -> uplink": "uplink", "other -> ": "def",
	} {
		if got, _ := c.DomainFor(label); got != want {
			t.Errorf("%q: %q, want %q", label, got, want)
		}
	}
	if _, errs := Parse(parseXML(t, `<config><policy label_last="x" domain="d"/></config>`)); len(errs) != 1 {
		t.Errorf("label_last on a <policy>: want one problem (not an attribute of Genode's policies), got %v", errs)
	}
}
