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

// A Linux network namespace behind nic_router configures itself by SLAAC (issue 35): its
// kernel, once IPv6 is on, solicits, takes the prefix of the router's RA for an address and
// the router's link-local address for its default route, and `ping -6` reaches the router's
// global address through NDP. Run under flock /tmp/nicstack-root.lock (the namespace is the vm's).
func TestSLAACGuestPingsRouter(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "ip", "ping")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/vm")
	sc := runText(t, "ipv6_slaac.xml", `<config>
	<parent-provides> <service name="LOG"/> <service name="Tap"/> </parent-provides>
	<default-route> <any-service> <parent/> <any-child/> </any-service> </default-route>
	<default caps="100" ram="16M"/>
	<affinity-space width="2" height="1"/>
`+routerStart("nic_router", `
		<policy label_prefix="vm" domain="lan"/>
		<domain name="lan" interface="10.0.1.1/24" interface_ipv6="2001:db8:1::1/64">
			<ra max_interval_sec="4"><dns-server ip="2001:db8:1::53"/></ra>
		</domain>`)+
		`<start name="vm" ram="128M"> <affinity xpos="0" ypos="0"/>
		<config guest="netns" netns="vm" tap_address="10.0.1.2/24" tap_gateway="10.0.1.1" mtu="1500" offload="no"/>
	</start>
</config>`)
	// The supervisor names the namespace after the test's process ("namespace vm made as").
	var ns string
	for deadline := time.Now().Add(30 * time.Second); ns == ""; time.Sleep(100 * time.Millisecond) {
		if m := regexp.MustCompile(`namespace vm made as ([\w.-]+)`).FindStringSubmatch(sc.Logs.String()); m != nil {
			ns = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no namespace for the vm:\n%s", sc.Logs.String())
		}
	}
	ipIn := func(args ...string) string {
		out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("ip -n %s %v: %v %s", ns, args, err, out)
		}
		return string(out)
	}
	within := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30 s; the vm's addresses:\n%s\nroutes:\n%s\nlogs:\n%s", what,
					ipIn("-6", "addr"), ipIn("-6", "route"), sc.Logs.String())
			}
		}
	}
	// The namespace comes IPv4-only (runtime/netns): the test turns IPv6 on in it, for the
	// guest's TAP too.
	var dev string
	within("the guest's TAP", func() bool {
		out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", "type", "tun").Output()
		if f := strings.Fields(string(out)); err == nil && len(f) > 1 {
			dev = strings.TrimSuffix(f[1], ":")
			return true
		}
		return false
	})
	for _, k := range []string{"all", "default", dev} {
		if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-w", "net.ipv6.conf."+k+".disable_ipv6=0").CombinedOutput(); err != nil {
			t.Fatalf("sysctl %s: %v %s", k, err, out)
		}
	}
	within("a SLAAC address from the RA's prefix", func() bool {
		a := ipIn("-6", "addr", "show", "dev", dev, "scope", "global")
		return strings.Contains(a, "2001:db8:1:0:") && !strings.Contains(a, "tentative")
	})
	within("a default route via the router's link-local address", func() bool {
		return strings.Contains(ipIn("-6", "route", "show", "default"), "via fe80::")
	})
	out, err := exec.Command("ip", "netns", "exec", ns, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", "2001:db8:1::1").CombinedOutput()
	if err != nil {
		t.Fatalf("ping -6 the router: %v\n%s", err, out)
	}
	t.Logf("guest: %s", strings.TrimSpace(ipIn("-6", "-o", "addr", "show", "dev", dev, "scope", "global")))
}
