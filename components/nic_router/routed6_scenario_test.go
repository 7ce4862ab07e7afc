package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// deploy/ipv6_routed.hid: the lan's prefix routed without NAT. The netns vm configures itself
// by SLAAC from the RA, ping -6 reaches the far end, the real iperf3 -6 runs both ways, and the
// far end sees the vm's own SLAAC address as its peer (its iperf3 server's log), and reaches
// the vm at it (ping -6 from the far end, which the uplink's <icmp> rule routes into the lan).
func TestRoutedPrefixScenario(t *testing.T) {
	sc, vm, far := slaacScenario(t, "ipv6_routed.hid")
	m := regexp.MustCompile(`inet6 (2001:db8:1:0:[0-9a-f:]+)/64`).FindStringSubmatch(vm.ip("-6", "addr", "show", "dev", vm.dev, "scope", "global"))
	if m == nil {
		t.Fatalf("no SLAAC address in the vm:\n%s", vm.ip("-6", "addr"))
	}
	guest := m[1]
	ping := func(from *ipv6NS, to string) {
		t.Helper()
		if out, err := exec.Command("ip", "netns", "exec", from.name, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", to).CombinedOutput(); err != nil {
			t.Fatalf("ping -6 %s in %s: %v\n%s\nlogs:\n%s", to, from.name, err, out, sc.Logs.String())
		}
	}
	ping(vm, "2001:db8:ffff::2")
	up := iperf3(t, vm, "-t", "2")
	down := iperf3(t, vm, "-t", "2", "-R")
	if !strings.Contains(sc.Logs.String(), "Accepted connection from "+guest) {
		t.Fatalf("the far end's iperf3 server did not see the vm's address %s as its peer:\n%s", guest, sc.Logs.String())
	}
	ping(far, guest)
	t.Logf("iperf3 -6 routed, the far end's peer %s: vm to far %.0f Mbit/s, far to vm %.0f Mbit/s",
		guest, up.End.SumReceived.BitsPerSecond/1e6, down.End.SumReceived.BitsPerSecond/1e6)
}
