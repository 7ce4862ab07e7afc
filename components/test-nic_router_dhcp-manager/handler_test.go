package main

import (
	"strings"
	"testing"

	"github.com/nicstack/nicstack/runtime/config"
)

// As Genode's manager: the uplink's DNS config is taken while its address is valid, a state
// without one (the uplink redoing DHCP) changes nothing, and the config written gives the
// servers to the downlink's DHCP server.
func TestManagerForwardsTheUplinksDNSConfig(t *testing.T) {
	h := &Handler{}
	state := func(text string) *config.Node {
		n, err := config.Parse("router_state", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	h.read(state(`<state> <domain name="downlink" ipv4="10.0.3.1/24"/> <domain name="uplink" ipv4="10.2.3.2/24" gw="10.2.3.1">
		<dns ip="1.2.3.4"/> <dns ip="2.3.4.5"/> <dns-domain name="genode.org"/> </domain> </state>`))
	if !h.outdated || strings.Join(h.dnsServers, ",") != "1.2.3.4,2.3.4.5" || h.dnsDomain != "genode.org" {
		t.Fatalf("read %v %q (outdated %v)", h.dnsServers, h.dnsDomain, h.outdated)
	}
	h.outdated = false
	h.read(state(`<state> <domain name="uplink" ipv4="0.0.0.0/32" gw="0.0.0.0"/> </state>`))
	if h.outdated || len(h.dnsServers) != 2 {
		t.Fatal("a state without the uplink's address changed the config")
	}
	cfg := string(routerConfig(h.dnsServers, h.dnsDomain).XML())
	for _, want := range []string{`<dhcp-server ip_first="10.0.3.2" ip_last="10.0.3.2">`, `<dns-server ip="1.2.3.4"/>`,
		`<dns-server ip="2.3.4.5"/>`, `<dns-domain name="genode.org"/>`, `<report bytes="no" stats="no" quota="no" config="yes" config_triggers="yes"`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %s:\n%s", want, cfg)
		}
	}
}
