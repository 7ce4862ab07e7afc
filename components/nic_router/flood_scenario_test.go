package main

import (
	"testing"
	"time"
)

// A bounded flood (48000 frames) of TCP SYN..FIN, UDP and ICMP echo through the NAT of the
// uplink domain to addresses nobody has: in its subnet (frames held for ARP that never comes)
// and outside (no gateway). Meanwhile a ping to the
// good host keeps getting its answers.
func TestFloodToUnroutableThroughNAT(t *testing.T) {
	const rate, ms = 8000, 2000
	sc := runText(t, "flood.xml", scenarioHead+routerStart("nic_router", `
		<policy label="host -> " domain="wan"/> <default-policy domain="lan"/>
		<domain name="wan" interface="198.18.0.10/24">
			<nat domain="lan" tcp-ports="50" udp-ports="50" icmp-ids="200"/>
		</domain>
		<domain name="lan" interface="10.0.1.1/24">
			<tcp dst="0.0.0.0/0"> <permit-any domain="wan"/> </tcp>
			<udp dst="0.0.0.0/0"> <permit-any domain="wan"/> </udp>
			<icmp dst="0.0.0.0/0" domain="wan"/>
		</domain>`)+
		perfStart("host", `ip="198.18.0.1"`)+
		perfStart("ping", `tx="yes" protocol="icmp" ip="10.0.1.3" mac="02:00:00:00:00:03" dst_ip="198.18.0.1" size="98" rate="50"`)+
		`<!-- flooders --> </config>`)
	sc.waitCounter("ping", "rx_frames", 5)
	tx0, rx0 := sc.counter("ping", "tx_frames"), sc.counter("ping", "rx_frames")
	// The flooders join a running scenario: the supervisor starts what the edited file adds.
	sc.Edit(`<!-- flooders -->`, perfStart("fu", `tx="yes" ip="10.0.1.4" mac="02:00:00:00:00:04" dst_ip="198.18.0.99" flows="1000" size="64" rate="8000" duration_ms="2000"`)+
		perfStart("ft", `tx="yes" protocol="tcp" ip="10.0.1.5" mac="02:00:00:00:00:05" dst_ip="198.19.5.5" dst_port="80" flows="1000" size="64" rate="8000" duration_ms="2000"`)+
		perfStart("fi", `tx="yes" protocol="icmp" ip="10.0.1.6" mac="02:00:00:00:00:06" dst_ip="198.18.0.98" flows="100" size="64" rate="8000" duration_ms="2000"`))
	for _, f := range []string{"fu", "ft", "fi"} {
		sc.waitComponent(f)
	}
	// The generators stop at duration_ms. How much of rate x duration they get out depends on
	// the machine: frames held for an ARP answer that never comes fill a flooder's stream
	// until the wait times out, and a loaded CI machine starves them.
	time.Sleep(ms * time.Millisecond)
	var flood uint64
	for _, f := range []string{"fu", "ft", "fi"} {
		flood += sc.waitSteady(f, "tx_frames")
	}
	if flood < rate*ms/1000/2 {
		t.Fatalf("the flooders sent only %d frames", flood)
	}
	tx1 := sc.counter("ping", "tx_frames")
	time.Sleep(200 * time.Millisecond) // the answers to the last pings in flight
	rx1 := sc.counter("ping", "rx_frames")
	sent, answered := tx1-tx0, rx1-rx0
	t.Logf("during the flood: %d pings sent, %d answered; router dropped %d, nat_refused %d, arp_timeouts %d",
		sent, answered, sc.counter("nic_router", "dropped"), sc.counter("nic_router", "nat_refused"), sc.counter("nic_router", "arp_timeouts"))
	if sent < 20 || answered < sent*8/10 {
		t.Errorf("during the flood %d pings were sent and %d answered", sent, answered)
	}
	// No flood frame goes anywhere (and none takes a NAT port: a frame waiting for ARP has
	// no link yet, as in Genode): each is dropped, at the latest when its ARP wait times out.
	sc.waitCounter("nic_router", "dropped", flood*9/10)
	if n := sc.counter("host", "rx_frames"); n != 0 {
		t.Errorf("the good host received %d flood frames", n)
	}
}

// waitSteady waits until a counter has not moved for 300 ms and returns it.
func (sc *scenario) waitSteady(component, name string) uint64 {
	sc.t.Helper()
	last, since := sc.counter(component, name), time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if v := sc.counter(component, name); v != last {
			last, since = v, time.Now()
		} else if time.Since(since) >= 300*time.Millisecond {
			return v
		}
	}
	sc.t.Fatalf("%s's %s kept moving for 30 s", component, name)
	return 0
}

// waitComponent waits until a component the scenario gained is running.
func (sc *scenario) waitComponent(name string) {
	sc.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, ok := sc.S.Status()
		if !ok {
			sc.t.Fatal("the scenario ended")
		}
		for _, c := range st.Components {
			if c.Name == name && c.Pid != 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			sc.t.Fatalf("component %q did not start", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
