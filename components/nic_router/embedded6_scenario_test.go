package main

import (
	"testing"

	"github.com/nicstack/nicstack/internal/testutil"
)

// deploy/ipv6.hid with an embedded guest (gVisor, components/internal/netstack) in the netns
// guest's place: it takes its SLAAC address and default route from the router's RA, and its
// iperf client runs through NAT66 to the far end's iperf3 server, each direction.
func TestNAT66EmbeddedGuest(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "ip", "iperf3")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/vm")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/linux_nic")
	for _, dir := range []string{"", " -R"} {
		t.Run("iperf"+dir, func(t *testing.T) {
			sc := run(t, "ipv6.hid",
				"config | guest: netns | netns: vm | tap_address: 10.0.1.2/24 | tap_gateway: 10.0.1.1 | mtu: 1500 | offload: yes",
				"config | guest: embedded | mtu: 1500 | offload: yes | iperf: -c 2001:db8:ffff::2 -6 -t 2"+dir)
			sc.waitCounter("vm", "iperf_tests", 1)
			c := map[string]uint64{}
			for _, k := range []string{"iperf_errors", "iperf_bytes", "iperf_bits_per_second", "ipv6_addresses"} {
				c[k] = sc.counter("vm", k)
			}
			if c["iperf_errors"] != 0 || c["iperf_bytes"] == 0 {
				t.Fatalf("vm counters %v: want a test without error\nlogs:\n%s", c, sc.Logs.String())
			}
			t.Logf("embedded guest iperf -6%s through NAT66: %.0f Mbit/s", dir, float64(c["iperf_bits_per_second"])/1e6)
		})
	}
}
