package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Genode's nic_router_dhcp test with three processes: router_1's downlink hands out DNS
// servers; router_2 gets its uplink's lease from it and hands the DNS servers on to its
// downlink's clients (dns_config_from); router_3, a nic-client of router_2 whose domain is a
// DHCP client, plays the test client and reports what it got. When router_1's config changes
// its DNS servers, the link-state feedback runs through all three: router_1 takes router_2's
// link down and up, router_2 loses its lease and so takes router_3's link down until it has
// the new one, and router_3 asks again and gets the new DNS servers.
func TestDNSConfigPropagatesThroughLinkState(t *testing.T) {
	report := filepath.Join(t.TempDir(), "router_3.state")
	nicTo := func(server string) string {
		return `<route> <service name="Nic"> <child name="` + server + `"/> </service> <any-service> <parent/> </any-service> </route>`
	}
	withRoute := func(start, server string) string {
		return strings.Replace(start, `</provides>`, `</provides> `+nicTo(server), 1)
	}
	sc := runText(t, "dns_config.xml", scenarioHead+routerStart("router_1", `
		<default-policy domain="downlink"/>
		<domain name="downlink" interface="10.2.3.1/24">
			<dhcp-server ip_first="10.2.3.2" ip_last="10.2.3.2">
				<dns-server ip="1.2.3.4"/> <dns-server ip="2.3.4.5"/>
			</dhcp-server>
		</domain>`)+
		withRoute(routerStart("router_2", `
		<nic-client label="uplink" domain="uplink"/>
		<default-policy domain="downlink"/>
		<domain name="uplink"/>
		<domain name="downlink" interface="10.0.3.1/24">
			<dhcp-server ip_first="10.0.3.2" ip_last="10.0.3.2" dns_config_from="uplink"/>
		</domain>`), "router_1")+
		withRoute(routerStart("router_3", `
		<report interval_sec="1" config="yes" bytes="no" stats="no" quota="no" file="`+report+`"/>
		<nic-client label="uplink" domain="up"/>
		<domain name="up"/>`), "router_2")+
		`</config>`)
	waitReport := func(want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			b, _ := os.ReadFile(report)
			if strings.Contains(string(b), want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("router_3's state report lacks %q:\n%s", want, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitReport("ip: 2.3.4.5")
	sc.Edit(`<dns-server ip="1.2.3.4"/> <dns-server ip="2.3.4.5"/>`, `<dns-server ip="4.5.6.7"/>`)
	waitReport("ip: 4.5.6.7")
	if b, _ := os.ReadFile(report); strings.Contains(string(b), "2.3.4.5") {
		t.Fatalf("the old DNS server is still reported:\n%s", b)
	}
}
