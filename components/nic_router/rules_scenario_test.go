package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// Scenario tests after Genode's run scripts that need no deploy/ file of their own: each
// builds its scenario from the pieces below.

const scenarioHead = `<config>
	<parent-provides> <service name="LOG"/> </parent-provides>
	<default-route> <any-service> <parent/> <any-child/> </any-service> </default-route>
	<default caps="100" ram="16M"/>
	<affinity-space width="2" height="1"/>
`

// routerStart is a nic_router named name with the given <config> body.
func routerStart(name, body string) string {
	return `<start name="` + name + `" ram="32M"> <binary name="nic_router"/> <affinity xpos="1" ypos="0"/>
		<provides> <service name="Nic"/> <service name="Uplink"/> </provides>
		<config> ` + body + ` </config>
	</start>
`
}

// perfStart is a nic_perf named name with the given <config> attributes.
func perfStart(name, attrs string) string {
	return `<start name="` + name + `"> <binary name="nic_perf"/> <affinity xpos="0" ypos="0"/> <config period_ms="0" ` + attrs + `/> </start>
`
}

// <ip dst domain> rules in both directions: domain a forwards every IP packet for b's subnet
// by an ip rule (here ICMP echo requests of "pa"), domain b forwards UDP of "pb" into a by
// another. The echo replies return through the link state the requests made.
func TestIPRulesBothWays(t *testing.T) {
	sc := runText(t, "ip_rules.xml", scenarioHead+routerStart("nic_router", `
		<policy label="pa -> " domain="a"/> <policy label="pb -> " domain="b"/>
		<domain name="a" interface="10.0.1.1/24"> <ip dst="10.0.2.0/24" domain="b"/> </domain>
		<domain name="b" interface="10.0.2.1/24"> <ip dst="10.0.1.0/24" domain="a"/> </domain>`)+
		perfStart("pa", `tx="yes" protocol="icmp" ip="10.0.1.2" dst_ip="10.0.2.2" size="98" rate="50"`)+
		perfStart("pb", `tx="yes" ip="10.0.2.2" mac="02:00:00:00:00:03" dst_ip="10.0.1.2" size="128" rate="2000"`)+
		`</config>`)
	// pa's rx_frames are echo replies (50/s) and pb's UDP; 1000 of them need the UDP.
	sc.waitCounter("pa", "rx_frames", 1000)
	// pb answers ARP (once or twice) and the echo requests.
	sc.waitCounter("pb", "answers", 20)
}

// use_arp="no": the router sends into domain b without asking ARP (the frames go to the
// interface's own MAC) and answers no ARP there; UDP and pings still flow.
func TestUseARPNo(t *testing.T) {
	sc := runText(t, "use_arp.xml", scenarioHead+routerStart("nic_router", `
		<policy label="tx -> " domain="a"/> <policy label="rx -> " domain="b"/> <policy label="ping -> " domain="a"/>
		<domain name="a" interface="10.0.1.1/24">
			<udp dst="10.0.2.0/24"> <permit-any domain="b"/> </udp>
			<icmp dst="10.0.2.0/24" domain="b"/>
		</domain>
		<domain name="b" interface="10.0.2.1/24" use_arp="no"/>`)+
		perfStart("rx", `ip="10.0.2.2"`)+
		perfStart("tx", `tx="yes" ip="10.0.1.2" dst_ip="10.0.2.2" size="128" rate="2000"`)+
		perfStart("ping", `tx="yes" protocol="icmp" ip="10.0.1.3" mac="02:00:00:00:00:03" dst_ip="10.0.2.2" size="98" rate="50"`)+
		`</config>`)
	sc.waitCounter("rx", "rx_frames", 1000)
	sc.waitCounter("ping", "rx_frames", 10)
	// rx answered only echo requests: the router asked no ARP into b.
	if a, p := sc.counter("rx", "answers"), sc.counter("ping", "tx_frames"); a > p {
		t.Errorf("rx answered %d requests for %d pings: the router used ARP in domain b", a, p)
	}
}

// TCP between domains with nic_perf's raw TCP exchange (SYN, SYN|ACK, ACK with data,
// FIN|ACK both ways, ACK): "ca" in domain a connects to "sb" in b by a <tcp dst> permit rule;
// "cb" in b connects to the router's port 8080, which a <tcp-forward> sends to ca's port 80.
// Both clients get their answers back through the link states.
func TestTCPBetweenDomains(t *testing.T) {
	report := filepath.Join(t.TempDir(), "router.state.xml")
	sc := runText(t, "tcp.xml", scenarioHead+routerStart("nic_router", `
		<report interval_sec="1" stats="yes" link_state="yes" file="`+report+`"/>
		<policy label="ca -> " domain="a"/> <policy label="sb -> " domain="b"/> <policy label="cb -> " domain="b"/>
		<domain name="a" interface="10.0.1.1/24">
			<tcp dst="10.0.2.0/24"> <permit port="80" domain="b"/> </tcp>
		</domain>
		<domain name="b" interface="10.0.2.1/24">
			<tcp-forward port="8080" domain="a" to="10.0.1.2" to_port="80"/>
		</domain>`)+
		perfStart("sb", `ip="10.0.2.2"`)+
		perfStart("ca", `tx="yes" protocol="tcp" ip="10.0.1.2" dst_ip="10.0.2.2" dst_port="80" flows="500" size="200" rate="400"`)+
		perfStart("cb", `tx="yes" protocol="tcp" ip="10.0.2.3" mac="02:00:00:00:00:03" dst_ip="10.0.2.1" dst_port="8080" flows="500" size="200" rate="400"`)+
		`</config>`)
	// 100 connections each way: a SYN and a FIN answered per connection.
	sc.waitCounter("sb", "answers", 200)
	sc.waitCounter("cb", "rx_frames", 200)
	// The links went through opening and open to closed: the state report (every second)
	// counts at least 50 closed TCP links at each client's interface.
	closed := regexp.MustCompile(`<closed value="(\d+)"/>`) // only TCP links close
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(report)
		m := closed.FindAllStringSubmatch(string(b), -1)
		if len(m) == 2 && atoi(m[0][1]) >= 50 && atoi(m[1][1]) >= 50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state report:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
