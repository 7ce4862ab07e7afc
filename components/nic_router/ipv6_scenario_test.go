package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
)

// Linux network namespaces behind nic_router speak IPv6 through it (issue 35). The guest
// "vm" configures itself by SLAAC: its kernel, once IPv6 is on, solicits, takes the prefix of
// the router's RA for an address and the router's link-local address for its default route,
// and `ping -6` reaches the router's global address through NDP. The host "far", behind the
// uplink with a static address and a route to the lan's prefix through the router, is
// reached too: routed between the domains without NAT, both ways by the rules, each side's
// neighbour found by NDP. Run under flock /tmp/nicstack-root.lock (namespaces vm and far).
func TestIPv6GuestsThroughRouter(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "ip", "ping")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/vm")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/linux_nic")
	sc := runText(t, "ipv6_guests.xml", `<config>
	<parent-provides> <service name="LOG"/> <service name="Tap"/> </parent-provides>
	<default-route> <any-service> <parent/> <any-child/> </any-service> </default-route>
	<default caps="100" ram="16M"/>
	<affinity-space width="2" height="1"/>
	<start name="nic_drv" ram="64M"> <binary name="linux_nic"/> <affinity xpos="0" ypos="0"/>
		<config netns="far" address="198.18.0.2/24" mac="02:00:00:00:00:01" label="uplink"/>
	</start>
`+routerStart("nic_router", `
		<policy label_prefix="vm" domain="lan"/> <policy label="nic_drv -> uplink" domain="uplink"/>
		<domain name="uplink" interface="198.18.0.1/24" interface_ipv6="2001:db8:2::1/64">
			<ip dst="2001:db8:1::/64" domain="lan"/>
		</domain>
		<domain name="lan" interface="10.0.1.1/24" interface_ipv6="2001:db8:1::1/64">
			<icmp dst="2001:db8:2::/64" domain="uplink"/>
			<ra max_interval_sec="4"><dns-server ip="2001:db8:1::53"/></ra>
		</domain>`)+
		`<start name="vm" ram="128M"> <affinity xpos="0" ypos="0"/>
		<config guest="netns" netns="vm" tap_address="10.0.1.2/24" tap_gateway="10.0.1.1" mtu="1500" offload="no"/>
	</start>
</config>`)
	within := sc.within
	vm, far := ipv6Namespace(t, sc, within, "vm"), ipv6Namespace(t, sc, within, "far")
	show := func() string { return vm.ip("-6", "addr") + vm.ip("-6", "route") + far.ip("-6", "addr") }
	within("the vm's SLAAC address from the RA's prefix", func() bool {
		a := vm.ip("-6", "addr", "show", "dev", vm.dev, "scope", "global")
		return strings.Contains(a, "2001:db8:1:0:") && !strings.Contains(a, "tentative")
	}, show)
	within("the vm's default route via the router's link-local address", func() bool {
		return strings.Contains(vm.ip("-6", "route", "show", "default"), "via fe80::")
	}, show)
	far.must("-6", "addr", "add", "2001:db8:2::2/64", "dev", far.dev, "nodad")
	far.must("-6", "route", "add", "2001:db8:1::/64", "via", "2001:db8:2::1")
	for _, to := range []string{"2001:db8:1::1", "2001:db8:2::2"} {
		out, err := exec.Command("ip", "netns", "exec", vm.name, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", to).CombinedOutput()
		if err != nil {
			t.Fatalf("ping -6 %s from the vm: %v\n%s\n%s", to, err, out, show())
		}
	}
	t.Logf("vm: %s", strings.TrimSpace(vm.ip("-6", "-o", "addr", "show", "dev", vm.dev, "scope", "global")))
}

// within waits up to 30 s for ok, and fails the test with what, show's and the logs.
func (sc *scenario) within(what string, ok func() bool, show func() string) {
	sc.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			sc.t.Fatalf("%s: not within 30 s\n%s\nlogs:\n%s", what, show(), sc.Logs.String())
		}
	}
}

// ipv6NS is a namespace of the scenario with IPv6 turned on, and its TAP.
type ipv6NS struct {
	t         *testing.T
	name, dev string
}

// ipv6Namespace finds the namespace the scenario made for label (the supervisor names it
// after the test's process: "namespace vm made as ...") and its TAP, and turns IPv6 on there:
// namespaces come IPv4-only (runtime/netns).
func ipv6Namespace(t *testing.T, sc *scenario, within func(string, func() bool, func() string), label string) *ipv6NS {
	t.Helper()
	n := &ipv6NS{t: t}
	re := regexp.MustCompile(`namespace ` + label + ` made as ([\w.-]+)`)
	within("the namespace "+label, func() bool {
		if m := re.FindStringSubmatch(sc.Logs.String()); m != nil {
			n.name = m[1]
		}
		return n.name != ""
	}, func() string { return "" })
	within("the TAP in "+label, func() bool {
		out, err := exec.Command("ip", "-n", n.name, "-o", "link", "show", "type", "tun").Output()
		if f := strings.Fields(string(out)); err == nil && len(f) > 1 {
			n.dev = strings.TrimSuffix(f[1], ":")
		}
		return n.dev != ""
	}, func() string { return n.ip("link") })
	for _, k := range []string{"all", "default", n.dev} {
		if out, err := exec.Command("ip", "netns", "exec", n.name, "sysctl", "-w", "net.ipv6.conf."+k+".disable_ipv6=0").CombinedOutput(); err != nil {
			t.Fatalf("sysctl %s in %s: %v %s", k, label, err, out)
		}
	}
	return n
}

// ip runs ip in the namespace and returns its output, or the error.
func (n *ipv6NS) ip(args ...string) string {
	out, err := exec.Command("ip", append([]string{"-n", n.name}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("ip -n %s %v: %v %s", n.name, args, err, out)
	}
	return string(out)
}

func (n *ipv6NS) must(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", append([]string{"-n", n.name}, args...)...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip -n %s %v: %v %s", n.name, args, err, out)
	}
}
