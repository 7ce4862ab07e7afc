package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// Chained routers with DHCP, as Genode's nic_router_dhcp run scripts: router_a reaches
// router_b through a <nic-client>; its domain "up" has no interface and gets 10.0.5.x by
// DHCP from router_b's dhcp-server (the gateway with it). UDP from "tx" behind router_a's NAT
// then flows through both routers to "rx" in router_b's domain "srv", and pings come back.
func TestChainedRoutersWithDHCP(t *testing.T) {
	report := filepath.Join(t.TempDir(), "a.state")
	nicTo := func(server string) string {
		return `<route> <service name="Nic"> <child name="` + server + `"/> </service> <any-service> <parent/> </any-service> </route>`
	}
	routerA := routerStart("router_a", `
		<report interval_sec="1" config="yes" file="`+report+`"/>
		<nic-client label="uplink" domain="up"/>
		<default-policy domain="lan"/>
		<domain name="up">
			<nat domain="lan" udp-ports="100" icmp-ids="100"/>
		</domain>
		<domain name="lan" interface="10.0.1.1/24">
			<udp dst="0.0.0.0/0"> <permit-any domain="up"/> </udp>
			<icmp dst="0.0.0.0/0" domain="up"/>
		</domain>`)
	routerA = regexp.MustCompile(`</provides>`).ReplaceAllString(routerA, `</provides> `+nicTo("router_b"))
	sc := runText(t, "chain.xml", scenarioHead+routerA+routerStart("router_b", `
		<policy label="rx -> " domain="srv"/> <default-policy domain="lan"/>
		<domain name="lan" interface="10.0.5.1/24">
			<dhcp-server ip_first="10.0.5.100" ip_last="10.0.5.200" ip_lease_time_sec="600"/>
			<udp dst="10.0.6.0/24"> <permit-any domain="srv"/> </udp>
			<icmp dst="10.0.6.0/24" domain="srv"/>
		</domain>
		<domain name="srv" interface="10.0.6.1/24"/>`)+
		`<start name="rx"> <binary name="nic_perf"/> <affinity xpos="0" ypos="0"/> `+nicTo("router_b")+` <config period_ms="0" ip="10.0.6.2"/> </start>
	<start name="tx"> <binary name="nic_perf"/> <affinity xpos="0" ypos="0"/> `+nicTo("router_a")+`
		<config period_ms="0" tx="yes" ip="10.0.1.2" dst_ip="10.0.6.2" size="128" rate="1000"/> </start>
	<start name="ping"> <binary name="nic_perf"/> <affinity xpos="0" ypos="0"/> `+nicTo("router_a")+`
		<config period_ms="0" tx="yes" protocol="icmp" ip="10.0.1.3" mac="02:00:00:00:00:03" dst_ip="10.0.6.2" size="98" rate="50"/> </start>
</config>`)
	sc.waitCounter("rx", "rx_frames", 500)
	sc.waitCounter("ping", "rx_frames", 10)
	// router_a reports the leased address and the gateway of domain up.
	lease := regexp.MustCompile(`domain up \|.* ipv4: 10\.0\.5\.\d+/24 \| gw: 10\.0\.5\.1`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(report)
		if lease.Match(b) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("router_a's state report:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
