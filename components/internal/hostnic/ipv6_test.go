package hostnic

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/netns"
)

// farEnd6 is linux_nic's far end with an IPv6 address and default route beside its IPv4
// ones, and a netns guest whose TAP has a static IPv6 address: what deploy/ipv6.hid's far end
// and guests need of the supervisor. The router has no IPv6 here; nothing crosses it.
const farEnd6 = `config
+ parent-provides
  + service LOG
  + service Tap
+ default-route
  + any-service
    + parent
    + any-child
+ default | caps: 100 | ram: 32M
+ start nic_router | ram: 32M
  + provides
    + service Nic
    + service Uplink
  + config
    + policy | label_prefix: far -> | domain: uplink
    + policy | label_prefix: vm | domain: default
    + domain uplink | interface: 198.18.12.1/24
    + domain default | interface: 10.0.12.1/24
+ start far
  + binary linux_nic
  + config | netns: g6far | address: 198.18.12.2/24 | address6: 2001:db8:ffff::2/64 | gateway6: 2001:db8:ffff::1 | tap_mtu: 1500 | offload: no
+ start vm
  + config | guest: netns | netns: g6vm | tap_address: 10.0.12.2/24 | tap_address6: fd00:12::2/64 | tap_gateway6: fd00:12::1
-
`

// in runs a command in the namespace open as ns and returns its output.
func in(t *testing.T, ns *os.File, argv ...string) string {
	t.Helper()
	out, err := exec.Command("nsenter", append([]string{"--net=" + ns.Name(), "--"}, argv...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// ipv6Iface waits for the interface in ns that has address (without DAD: at once, never
// tentative) and returns its name.
func ipv6Iface(t *testing.T, ns *os.File, address string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, line := range strings.Split(in(t, ns, "ip", "-o", "-6", "addr", "show"), "\n") {
			if f := strings.Fields(line); len(f) > 3 && f[3] == address {
				if strings.Contains(line, "tentative") {
					t.Errorf("%s is tentative: %s", address, line)
				}
				return f[1]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the namespace:\n%s", address, in(t, ns, "ip", "-6", "addr", "show"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkIPv6Host checks that iface in ns is an IPv6 host's: IPv6 on, forwarding off, router
// advertisements accepted, and the default route through gateway.
func checkIPv6Host(t *testing.T, ns *os.File, iface, gateway string) {
	t.Helper()
	for key, want := range map[string]string{"disable_ipv6": "0", "forwarding": "0", "accept_ra": "1", "autoconf": "1"} {
		if got := strings.TrimSpace(in(t, ns, "cat", filepath.Join("/proc/sys/net/ipv6/conf", iface, key))); got != want {
			t.Errorf("%s's %s = %s, want %s", iface, key, got, want)
		}
	}
	if route := in(t, ns, "ip", "-6", "route", "show", "default"); !strings.Contains(route, "via "+gateway+" dev "+iface) {
		t.Errorf("default route %q, want one via %s", route, gateway)
	}
}

// TestFarEndIPv6: the far end's namespace has 2001:db8:ffff::2/64 at once (nodad) with its
// default route, and answers ping -6 from a namespace of the test's joined to it by a veth;
// the netns guest's TAP has fd00:12::2/64 and its route; both interfaces take RAs.
func TestFarEndIPv6(t *testing.T) {
	testutil.RequireCommand(t, "ping", "nsenter")
	testutil.RequireRoot(t)
	testutil.Binary(t, "github.com/nicstack/nicstack/components/vm") // beside runScenario's binaries
	s, _ := runScenario(t, farEnd6)
	far, vm := runNS(t, s, "g6far"), runNS(t, s, "g6vm")

	tap := ipv6Iface(t, far, "2001:db8:ffff::2/64")
	checkIPv6Host(t, far, tap, "2001:db8:ffff::1")
	vmTap := ipv6Iface(t, vm, "fd00:12::2/64")
	checkIPv6Host(t, vm, vmTap, "fd00:12::1")

	// A namespace of the test's, with a veth into the far end's: 2001:db8:fffe::/64 between
	// them, the far end's address routed through it.
	peer, err := netns.New("g6peer")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if err := peer.IP("link", "add", "g6a", "type", "veth", "peer", "name", "g6b", "netns", far.Name()); err != nil {
		t.Fatal(err)
	}
	// New namespaces here may start with IPv6 off (the host's default.disable_ipv6), as the
	// supervisor's would without ipv6Host.
	enable := func(iface string) func() error {
		return func() error { return os.WriteFile("/proc/sys/net/ipv6/conf/"+iface+"/disable_ipv6", []byte("0"), 0) }
	}
	if err := peer.Do(enable("g6a")); err != nil {
		t.Fatal(err)
	}
	if err := netns.Do(far, enable("g6b")); err != nil {
		t.Fatal(err)
	}
	for _, step := range [][]string{
		{"ip", "-6", "addr", "add", "2001:db8:fffe::1/64", "dev", "g6a", "nodad"},
		{"ip", "link", "set", "g6a", "up"},
		{"ip", "-6", "route", "add", "2001:db8:ffff::/64", "via", "2001:db8:fffe::2"},
	} {
		in(t, peer.File, step...)
	}
	in(t, far, "ip", "-6", "addr", "add", "2001:db8:fffe::2/64", "dev", "g6b", "nodad")
	in(t, far, "ip", "link", "set", "g6b", "up")
	out := in(t, peer.File, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "5", "2001:db8:ffff::2")
	if !strings.Contains(out, " 0% packet loss") {
		t.Errorf("ping -6 2001:db8:ffff::2:\n%s", out)
	}
}
