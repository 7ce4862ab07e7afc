package model

import (
	"strings"
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

// parsed is Parse of a test's XML text, with its problems.
func parsed(t *testing.T, text string) (*Config, []error) {
	c := Parse(parseXML(t, text))
	return c, c.Problems
}

func TestParseDefaultsAndSchema(t *testing.T) {
	c, errs := parsed(t, `<config><domain name="x" interface="10.0.0.1/24"><nat domain="x" tcp-ports="3"/></domain></config>`)
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
	_, errs = parsed(t, `<config tcp_idle="1"><domian name="x"/><domain name="y" interface="10.0.0.1/24" use_arp="perhaps"/></config>`)
	if len(errs) != 3 {
		t.Fatalf("want 3 problems (unknown attribute, unknown node, bad boolean), got %v", errs)
	}
}

// The router picks a session's domain with the one matcher (runtime/label), so a Genode
// config's policies select as they do in Genode; label_last is init's, not a policy's.
func TestPolicySelection(t *testing.T) {
	c, errs := parsed(t, `<config>
		<policy label_prefix="vm" domain="short"/> <policy label_prefix="vm_1" domain="long"/>
		<policy label="vm_1 -> " domain="exact"/> <policy label_suffix=" -> uplink" domain="uplink"/>
		<default-policy domain="def"/>
		<domain name="short"/> <domain name="long"/> <domain name="exact"/> <domain name="uplink"/> <domain name="def"/>
	</config>`)
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
	if _, errs := parsed(t, `<config><policy label_last="x" domain="d"/></config>`); len(errs) != 1 {
		t.Errorf("label_last on a <policy>: want one problem (not an attribute of Genode's policies), got %v", errs)
	}
}

// <dhcp-server> as Genode reads it: a lease time of 0 is the default 3600 s; dns_config_from
// counts only without <dns-server> and valid <dns-domain> (else it is ignored); an unknown or invalid dns_config_from domain or a bad <dns-server> address
// invalidates the domain, a bad <dns-domain> only itself; each problem names file and line.
func TestDHCPServerDNSConfig(t *testing.T) {
	parse := func(server string) (*Config, []error) {
		return parsed(t, `<config>
<domain name="up"/>
<domain name="lan" interface="10.0.1.1/24">
  `+server+`
</domain>
</config>`)
	}
	c, errs := parse(`<dhcp-server ip_first="10.0.1.2" ip_last="10.0.1.9" ip_lease_time_sec="0" dns_config_from="up"/>`)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if s := c.Domains["lan"].DHCPServer; s.LeaseTime.Seconds() != 3600 || s.DNSConfigFrom != "up" {
		t.Fatalf("lease time %v, dns_config_from %q", s.LeaseTime, s.DNSConfigFrom)
	}
	if c, _ := parse(`<dhcp-server ip_first="10.0.1.2" ip_last="10.0.1.9"/>`); c.Domains["lan"].DHCPServer.LeaseTime.Seconds() != 3600 {
		t.Fatal("absent ip_lease_time_sec is not 3600 s")
	}

	// Beside static DNS config, dns_config_from is not even looked up (Genode accepts an
	// unknown domain there).
	c, errs = parse(`<dhcp-server ip_first="10.0.1.2" ip_last="10.0.1.9" dns_config_from="nowhere"><dns-server ip="1.2.3.4"/></dhcp-server>`)
	if s := c.Domains["lan"].DHCPServer; len(errs) != 0 || s == nil || s.DNSConfigFrom != "" || len(s.DNSServers) != 1 {
		t.Fatalf("static DNS server with dns_config_from: %+v, problems %v", s, errs)
	}

	for _, bad := range []struct{ server, want string }{
		{`<dhcp-server ip_first="10.0.1.2" ip_last="10.0.1.9" dns_config_from="upp"/>`,
			`test:4:55: invalid domain "lan": invalid <dhcp-server>: dns_config_from names unknown or invalid domain "upp"`},
		{`<dhcp-server ip_first="10.0.1.2" ip_last="10.0.1.9"><dns-server ip="1.2.3"/></dhcp-server>`,
			`test:3:2: invalid domain "lan": invalid <dhcp-server> at test:4:4: invalid DNS server entry: test:4:67: attribute "ip" of <dns-server>`},
		{`<dhcp-server ip_first="10.0.1.2" ip_last="10.0.1.9"><dns-server ip="0.0.0.0"/></dhcp-server>`,
			`invalid DNS server entry at test:4:56: 0.0.0.0`},
		{`<dhcp-server ip_first="10.0.1.2" ip_last="10.0.1.9"><dns-server/></dhcp-server>`,
			`invalid DNS server entry at test:4:56: missing ip`},
	} {
		c, errs := parse(bad.server)
		if c.Domains["lan"] != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), bad.want) {
			t.Errorf("%s: domain kept (%v) or problems %v, want %q", bad.server, c.Domains["lan"] != nil, errs, bad.want)
		}
	}

	// An empty or oversized <dns-domain> is dropped, so dns_config_from counts again.
	c, errs = parse(`<dhcp-server ip_first="10.0.1.2" ip_last="10.0.1.9" dns_config_from="up"><dns-domain name="` + strings.Repeat("x", 254) + `"/></dhcp-server>`)
	if s := c.Domains["lan"].DHCPServer; s.DNSDomain != "" || s.DNSConfigFrom != "up" {
		t.Fatalf("oversized dns-domain: %+v", s)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "test:4:77: <dns-domain>") {
		t.Fatalf("want one problem at <dns-domain>, got %v", errs)
	}
}

func TestServes(t *testing.T) {
	c, _ := parsed(t, `<config>
		<policy label_prefix="vm" domain="default"/>
		<policy label="static" domain="plain"/>
		<policy label="broken" domain="missing"/>
		<domain name="default" interface="10.0.1.1/24">
			<dhcp-server ip_first="10.0.1.2" ip_last="10.0.1.3"/>
		</domain>
		<domain name="plain" interface="10.0.2.1/24"/>
	</config>`)
	for _, tc := range []struct {
		label  string
		others []string
		err    string
	}{
		{"vm2", nil, ""},
		{"vm2", []string{"vm1", "static"}, ""},
		{"vm3", []string{"vm1", "vm2"}, "pool of domain \"default\" (10.0.1.2..10.0.1.3, 2 addresses) is full"},
		{"static", []string{"static", "static"}, ""}, // no DHCP server: no pool to spend
		{"c1", nil, "no <policy> of the router selects the label \"c1\""},
		{"broken", nil, "lacks or disables"},
	} {
		err := c.Serves(tc.label, tc.others)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s beside %v: %v", tc.label, tc.others, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s beside %v: got %v, want an error with %q", tc.label, tc.others, err, tc.err)
		}
	}
}

// Our IPv6 extension: interface_ipv6, gateway_ipv6, mtu and <ra> on a domain, IPv6 dst
// prefixes in the rules Genode has; each bad value invalidates its domain with file:line.
func TestIPv6Domain(t *testing.T) {
	c, errs := parsed(t, `<config>
<domain name="up" interface="10.0.2.2/24" interface_ipv6="2001:db8:2::2/64" gateway_ipv6="fe80::1">
  <tcp dst="2001:db8:1::/48"><permit-any domain="lan"/></tcp>
  <ip dst="::/0" domain="lan"/>
</domain>
<domain name="lan" interface="10.0.1.1/24" interface_ipv6="2001:db8:1::1/64" mtu="1400">
  <tcp dst="10.0.0.0/8"><permit-any domain="up"/></tcp>
  <udp dst="2001:db8::/32"><permit port="53" domain="up"/></udp>
  <icmp dst="2001:db8:2::/64" domain="up"/>
  <ra max_interval_sec="30"><dns-server ip="2001:db8:2::53"/></ra>
</domain>
</config>`)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	up, lan := c.Domains["up"], c.Domains["lan"]
	if up.Interface6.String() != "2001:db8:2::2/64" || up.Gateway6.String() != "fe80::1" || up.MTU != 1500 || up.RA != nil {
		t.Fatalf("up: %+v", up)
	}
	if lan.MTU != 1400 || lan.RA == nil || lan.RA.MaxInterval.Seconds() != 30 || lan.RA.Lifetime.Seconds() != 90 ||
		len(lan.RA.DNSServers) != 1 || lan.RA.DNSServers[0].String() != "2001:db8:2::53" {
		t.Fatalf("lan: %+v %+v", lan, lan.RA)
	}
	if lan.UDPRules[0].Dst.String() != "2001:db8::/32" || lan.ICMPRules[0].Dst.String() != "2001:db8:2::/64" ||
		up.IPRules[0].Dst.String() != "::/0" || up.TCPRules[0].Dst.String() != "2001:db8:1::/48" {
		t.Fatalf("rules %+v %+v", lan, up)
	}
	for _, bad := range []struct{ attrs, body, want string }{
		{`interface_ipv6="10.0.1.1/24"`, ``, `test:2:42: attribute "interface_ipv6" of <domain>: "10.0.1.1/24" is neither an IPv6 prefix`},
		{`interface_ipv6="fe80::1/64"`, ``, `interface_ipv6 fe80::1/64 is no global or unique local unicast address`},
		{`interface_ipv6="2001:db8:1::/64"`, ``, `interface_ipv6 2001:db8:1::/64 is no host address in a prefix`},
		{`gateway_ipv6="fe80::1"`, ``, `gateway_ipv6 without interface_ipv6`},
		{`interface_ipv6="2001:db8:1::1/64" gateway_ipv6="2001:db8:9::1"`, ``, `gateway_ipv6 2001:db8:9::1 is neither link-local nor in the prefix 2001:db8:1::/64`},
		{`mtu="1000"`, ``, `test:2:42: attribute "mtu" of <domain>: "1000" is not a number from 1280`},
		{``, `<ra/>`, `invalid <ra> at test:3:2: a domain without interface_ipv6 has no prefix to advertise`},
		{`interface_ipv6="2001:db8:1::1/64"`, `<ra max_interval_sec="2"/>`, `max_interval_sec 2 is not 4 to 1800`},
		{`interface_ipv6="2001:db8:1::1/64"`, `<ra lifetime_sec="100"/>`, `lifetime_sec 100 is neither 0 nor max_interval_sec (600) to 9000`},
		{`interface_ipv6="2001:db8:1::1/64"`, `<ra><dns-server ip="10.0.0.1"/></ra>`, `invalid <ra> at test:3:2: test:3:17: attribute "ip" of <dns-server>: "10.0.0.1" is not an IPv6 unicast address`},
		{``, `<tcp dst="2001:db8::/333"><permit-any domain="x"/></tcp>`, `invalid <tcp> at test:3:2: test:3:6: attribute "dst" of <tcp>: "2001:db8::/333" is not an IPv4 or IPv6 prefix`},
	} {
		c, errs := parsed(t, "<config>\n<domain name=\"x\" interface=\"10.0.1.1/24\" "+bad.attrs+">\n"+bad.body+"\n</domain>\n</config>")
		if c.Domains["x"] != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), bad.want) {
			t.Errorf("%s %s: domain kept (%v) or problems %v, want %q", bad.attrs, bad.body, c.Domains["x"] != nil, errs, bad.want)
		}
	}
}

// Issue 35's uplink: interface_ipv6="slaac", <ra dns_config_from>, forward rules to IPv6
// addresses; each bad use invalidates its domain with file:line.
func TestIPv6UplinkAndForwards(t *testing.T) {
	c, errs := parsed(t, `<config>
<domain name="up" interface_ipv6="slaac">
  <nat domain="lan" tcp-ports="10"/>
  <tcp-forward port="80" domain="lan" to="10.0.1.5"/>
  <tcp-forward port="80" domain="lan" to="2001:db8:1::5" to_port="8080"/>
  <udp-forward port="53" domain="lan" to="2001:db8:1::53"/>
</domain>
<domain name="lan" interface="10.0.1.1/24" interface_ipv6="2001:db8:1::1/64">
  <ra dns_config_from="up"/>
</domain>
<domain name="lan2" interface="10.0.2.1/24" interface_ipv6="2001:db8:3::1/64">
  <ra dns_config_from="up"><dns-server ip="2001:db8::53"/></ra>
</domain>
</config>`)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	up, lan, lan2 := c.Domains["up"], c.Domains["lan"], c.Domains["lan2"]
	if !up.SLAAC || up.Interface6.IsValid() || up.Interface.IsValid() || up.DHCPv6 != "ra" {
		t.Fatalf("up: %+v", up)
	}
	if up.TCPForward[80].To.String() != "10.0.1.5" || up.TCPForward6[80].To.String() != "2001:db8:1::5" ||
		up.TCPForward6[80].ToPort != 8080 || up.UDPForward6[53].Domain != "lan" || len(up.UDPForward) != 0 {
		t.Fatalf("forwards %+v %+v %+v", up.TCPForward, up.TCPForward6, up.UDPForward6)
	}
	// As Genode's <dhcp-server>: dns_config_from counts only without <dns-server>.
	if lan.RA.DNSConfigFrom != "up" || lan2.RA.DNSConfigFrom != "" {
		t.Fatalf("dns_config_from %q %q", lan.RA.DNSConfigFrom, lan2.RA.DNSConfigFrom)
	}
	for _, bad := range []struct{ attrs, body, want string }{
		{`interface_ipv6="slaac" gateway_ipv6="fe80::1"`, ``, `test:2:65: attribute "gateway_ipv6" of <domain>: not with interface_ipv6="slaac"`},
		{`interface_ipv6="slaac" dhcpv6="yes"`, ``, `test:2:65: attribute "dhcpv6" of <domain>: "yes" is not "ra", "always" or "no"`},
		{`interface_ipv6="2001:db8:1::1/64" dhcpv6="always"`, ``, `attribute "dhcpv6" of <domain>: only a domain with interface_ipv6="slaac" asks by DHCPv6`},
		{`interface_ipv6="SLAAC"`, ``, `test:2:42: attribute "interface_ipv6" of <domain>: "SLAAC" is neither an IPv6 prefix`},
		{`interface_ipv6="slaac"`, `<ra/>`, `invalid <ra> at test:3:2: a domain with interface_ipv6="slaac" has no prefix of its own to advertise`},
		{`interface_ipv6="2001:db8:1::1/64"`, `<ra dns_config_from="nowhere"/>`, `test:3:5: invalid domain "x": invalid <ra>: dns_config_from names unknown or invalid domain "nowhere"`},
		{``, `<tcp-forward port="80" domain="x" to="2001:db8::5"/>`, `invalid <tcp-forward> at test:3:2: test:3:35: attribute "to" of <tcp-forward>: 2001:db8::5 is IPv6, but the domain has no interface_ipv6`},
		{`interface_ipv6="slaac"`, `<udp-forward port="53" domain="x" to="fe80::5"/>`, `attribute "to" of <udp-forward>: "fe80::5" is neither an IPv4 address nor an IPv6 unicast one beyond the link`},
		{`interface_ipv6="slaac"`, `<tcp-forward port="22" domain="x" to="2001:db8::5"/><tcp-forward port="22" domain="x" to="2001:db8::6"/>`, `two <tcp-forward> rules for port 22 to IPv6 addresses`},
	} {
		c, errs := parsed(t, "<config>\n<domain name=\"x\" interface=\"10.0.1.1/24\" "+bad.attrs+">\n"+bad.body+"\n</domain>\n</config>")
		if c.Domains["x"] != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), bad.want) {
			t.Errorf("%s %s: domain kept (%v) or problems %v, want %q", bad.attrs, bad.body, c.Domains["x"] != nil, errs, bad.want)
		}
	}
}
