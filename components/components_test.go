package components

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/runtime/config"
)

// Every binary is in the table once, and Lookup names the known ones for one that is not.
func TestTableLookup(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Table {
		if seen[s.Binary] {
			t.Errorf("%s listed twice", s.Binary)
		}
		seen[s.Binary] = true
		if s.Schema == nil || s.Summary == "" {
			t.Errorf("%s: no schema or summary", s.Binary)
		}
	}
	if _, err := Table.Lookup("qemu"); err == nil || !strings.Contains(err.Error(), "nic_router") {
		t.Errorf("unknown binary: %v", err)
	}
}

// A nic_router config whose domain has an invalid interface is accepted at run time (the
// domain is disabled, as in Genode) but check names the problem with its position.
func TestRouterCheckNamesInvalidDomain(t *testing.T) {
	n, err := config.Parse("router.hid", []byte("config\n+ domain uplink | interface: 10.0.0.300/24\n-\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, warnings, err := Lookup("nic_router").Check(n, "nic_router")
	if err != nil {
		t.Fatalf("the router refused the config: %v", err)
	}
	if len(warnings) == 0 || !strings.HasPrefix(warnings[0].Error(), "router.hid:2:") {
		t.Fatalf("warnings %v, want one at router.hid:2", warnings)
	}
}

// check rejects a bad IPv4 address, prefix or rule destination in a router config (each
// disables its domain at run time), naming the attribute's line and column.
func TestRouterCheckRejectsBadAddresses(t *testing.T) {
	for _, c := range []struct{ domain, want string }{
		{`+ domain a | interface: 10.0.1.1/24 | gateway: 10.0.1.300`, `router.hid:2:39: attribute "gateway" of <domain>: "10.0.1.300" is not an IPv4 address`},
		{`+ domain a | interface: 10.0.1.1/33`, `router.hid:2:14: attribute "interface" of <domain>: "10.0.1.1/33" is not an IPv4 prefix`},
		{"+ domain a | interface: 10.0.1.1/24\n  + udp | dst: 10.0.2.x/24 | + permit-any | domain: a",
			`router.hid:3:11: attribute "dst" of <udp>: "10.0.2.x/24" is not an IPv4 or IPv6 prefix`},
	} {
		n, err := config.Parse("router.hid", []byte("config\n"+c.domain+"\n-\n"))
		if err != nil {
			t.Fatal(err)
		}
		_, warnings, _ := Lookup("nic_router").Check(n, "nic_router")
		if len(warnings) != 1 || !strings.Contains(warnings[0].Error(), c.want) {
			t.Errorf("%s: problems %v, want %q", c.domain, warnings, c.want)
		}
	}
}

// check names a <dhcp-server>'s dns_config_from that names no valid domain, and a bad
// <dns-server> address, each at its line (the router runs with the domain disabled).
func TestRouterCheckNamesDNSConfigProblems(t *testing.T) {
	n, err := config.Parse("router.hid", []byte(`config
+ domain lan | interface: 10.0.1.1/24
  + dhcp-server | ip_first: 10.0.1.2 | ip_last: 10.0.1.9 | dns_config_from: uplnk
+ domain lan2 | interface: 10.0.2.1/24
  + dhcp-server | ip_first: 10.0.2.2 | ip_last: 10.0.2.9
    + dns-server | ip: 0.0.0.0
-
`))
	if err != nil {
		t.Fatal(err)
	}
	_, warnings, err := Lookup("nic_router").Check(n, "nic_router")
	if err != nil || len(warnings) != 2 {
		t.Fatalf("warnings %v, error %v; want two problems", warnings, err)
	}
	for _, want := range []string{
		`router.hid:3:60: invalid domain "lan": invalid <dhcp-server>: dns_config_from names unknown or invalid domain "uplnk"`,
		`router.hid:4:3: invalid domain "lan2": invalid <dhcp-server> at router.hid:5:5: invalid DNS server entry at router.hid:6:7: 0.0.0.0`,
	} {
		if !strings.Contains(warnings[0].Error()+"\n"+warnings[1].Error(), want) {
			t.Errorf("problems %v lack %q", warnings, want)
		}
	}
}

// The drivers' Parse is their ParseConfig, <wire> included: check refuses what
// intel_nic_hw and ipxe_nic would refuse when configured, at the attribute's position.
func TestDriverCheckRefusesWhatTheComponentRefuses(t *testing.T) {
	for _, c := range []struct{ binary, config, at string }{
		{"intel_nic_hw", "<config>\n<wire type=\"tap\" netns=\"far\" offload=\"yes\"/>\n</config>", "nic.xml:2:"},
		{"intel_nic_hw", "<config>\n<wire type=\"tap\"/>\n</config>", "nic.xml:2:"},
		{"intel_nic_hw", "<config partner_speed=\"2500\"/>", "nic.xml:1:"},
		{"ipxe_nic", "<config\n\ttx_irq=\"never\"/>", "nic.xml:2:"},
	} {
		n, err := config.Parse("nic.xml", []byte(c.config))
		if err != nil {
			t.Fatal(err)
		}
		_, warnings, err := Lookup(c.binary).Check(n, c.binary)
		if len(warnings) != 0 || err == nil || !strings.HasPrefix(err.Error(), c.at) {
			t.Errorf("%s %q: warnings %v, error %v; want an error at %s", c.binary, c.config, warnings, err, c.at)
		}
	}
}

// Files and Sockets read the typed config Check parsed: the paths each component's config
// names, none for a config its component refuses.
func TestFilesAndSocketsOfTheParsedConfig(t *testing.T) {
	for _, c := range []struct {
		binary, config string
		files, sockets string
	}{
		{"nic_router", `<config><report file="state.xml"/></config>`, "[state.xml]", "[]"},
		{"nic_router", `<config><report/></config>`, "[]", "[]"},
		{"nic_dump", `<config pcap="dump.pcap"/>`, "[dump.pcap]", "[]"},
		{"vm", `<config guest="stream" report="iperf.json"/>`, "[iperf.json]", "[vm.sock]"},
		{"vm", `<config guest="stream" mtu="1"/>`, "[]", "[]"},
		{"remote_host", `<config report="far.json"/>`, "[far.json]", "[]"},
	} {
		n, err := config.ParseXML("c.xml", []byte(c.config))
		if err != nil {
			t.Fatal(err)
		}
		spec := Lookup(c.binary)
		cfg, _, _ := spec.Check(n, c.binary)
		var files, sockets []string
		if spec.Files != nil {
			files = spec.Files(cfg)
		}
		if spec.Sockets != nil {
			sockets = spec.Sockets(cfg)
		}
		if fmt.Sprint(files) != c.files || fmt.Sprint(sockets) != c.sockets {
			t.Errorf("%s %s: files %v, sockets %v; want %s and %s", c.binary, c.config, files, sockets, c.files, c.sockets)
		}
	}
}
