package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/internal/testutil"
)

// Issue 35's uplink between two real routers: router_a reaches router_b through a
// <nic-client>, and its domain "up" (interface_ipv6="slaac") takes its IPv6 address, gateway
// and DNS server from router_b's <ra>, as TestChainedRoutersWithDHCP's takes IPv4's by DHCP.
// router_a's state report shows the address and router_b's DNS server (which its lan's RA
// carries on, dns_config_from: router/slaac_test.go reads those RAs). The Linux guest "vm"
// behind router_a configures itself by SLAAC from router_a's RA, and `ping -6` reaches
// router_b's address through router_a's NAT66 to its SLAAC address. Run under flock
// /tmp/nicstack-root.lock (namespace vm).
func TestSLAACUplinkFromChainedRouter(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "ip", "ping")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/vm")
	report := filepath.Join(t.TempDir(), "a.state")
	nicTo := func(server string) string {
		return `<route> <service name="Nic"> <child name="` + server + `"/> </service> <any-service> <parent/> </any-service> </route>`
	}
	routerA := routerStart("router_a", `
		<report interval_sec="1" config="yes" file="`+report+`"/>
		<nic-client label="uplink" domain="up"/>
		<policy label_prefix="vm" domain="lan"/>
		<domain name="up" interface_ipv6="slaac">
			<nat domain="lan" udp-ports="100" icmp-ids="100"/>
		</domain>
		<domain name="lan" interface="10.0.1.1/24" interface_ipv6="2001:db8:1::1/64">
			<icmp dst="::/0" domain="up"/>
			<ra max_interval_sec="4" dns_config_from="up"/>
		</domain>`)
	routerA = regexp.MustCompile(`</provides>`).ReplaceAllString(routerA, `</provides> `+nicTo("router_b"))
	sc := runText(t, "slaac_chain.xml", `<config>
	<parent-provides> <service name="LOG"/> <service name="Tap"/> </parent-provides>
	<default-route> <any-service> <parent/> <any-child/> </any-service> </default-route>
	<default caps="100" ram="16M"/>
	<affinity-space width="2" height="1"/>
`+routerA+routerStart("router_b", `
		<default-policy domain="lan"/>
		<domain name="lan" interface="10.0.5.1/24" interface_ipv6="2001:db8:5::1/64">
			<ra max_interval_sec="4"><dns-server ip="2001:db8:5::53"/></ra>
		</domain>`)+
		`<start name="vm" ram="128M"> <affinity xpos="0" ypos="0"/> `+nicTo("router_a")+`
		<config guest="netns" netns="vm" tap_address="10.0.1.2/24" tap_gateway="10.0.1.1" mtu="1500" offload="no"/>
	</start>
</config>`)
	within := sc.within
	vm := ipv6Namespace(t, sc, within, "vm")
	state := func() string { b, _ := os.ReadFile(report); return string(b) }
	show := func() string { return vm.ip("-6", "addr") + vm.ip("-6", "route") + state() }
	slaac := regexp.MustCompile(`ipv6: 2001:db8:5:0:[0-9a-f:]+/64`)
	within("router_a's uplink address by SLAAC from router_b's RA, and its DNS server", func() bool {
		s := state()
		return slaac.MatchString(s) && strings.Contains(s, "2001:db8:5::53")
	}, show)
	within("the vm's SLAAC address from router_a's RA", func() bool {
		a := vm.ip("-6", "addr", "show", "dev", vm.dev, "scope", "global")
		return strings.Contains(a, "2001:db8:1:0:") && !strings.Contains(a, "tentative")
	}, show)
	within("the vm's default route via router_a", func() bool {
		return strings.Contains(vm.ip("-6", "route", "show", "default"), "via fe80::")
	}, show)
	out, err := exec.Command("ip", "netns", "exec", vm.name, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", "2001:db8:5::1").CombinedOutput()
	if err != nil {
		t.Fatalf("ping -6 router_b from the vm: %v\n%s\n%s", err, out, show())
	}
	t.Logf("router_a's uplink: %s", slaac.FindString(state()))
}
