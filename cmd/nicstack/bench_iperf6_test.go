package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/internal/testutil"
)

// `nicstack bench iperf --ip 4,6` on sculpt_iperf_direct made dual-stack (remote_host with an
// address6, NAT66 in the router, the embedded vm by SLAAC): every direction runs over both IP
// versions in the same invocation, the JSON has each point's "ip", the tables say which is
// which, and the report prints IPv6's throughput against IPv4's.
func TestBenchIperfIPv6(t *testing.T) {
	for _, c := range []string{"vm", "remote_host", "nic_router"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "sculpt_iperf_direct.hid"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, r := range [][2]string{
		{"address: 198.18.0.2/24 |", "address: 198.18.0.2/24 | address6: 2001:db8:ffff::2/64 |"},
		{"domain uplink | interface: 198.18.0.1/24", "domain uplink | interface: 198.18.0.1/24 | interface_ipv6: 2001:db8:ffff::1/64"},
		{"domain default | interface: 10.0.1.1/24", "domain default | interface: 10.0.1.1/24 | interface_ipv6: 2001:db8:1::1/64\n" +
			"      + ra | max_interval_sec: 4\n      + tcp | dst: 2001:db8:ffff::/64\n        + permit-any | domain: uplink"},
	} {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("no %q in sculpt_iperf_direct.hid", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	path := filepath.Join(t.TempDir(), "dual.hid")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	points, b := runBenchJSON(t, "rx_irq_throttle  tx_batch  Mbit/s", 2, []string{"ip", "direction", "mbps"},
		"iperf", path, "--time", "1s", "--omit", "0s", "--ip", "4,6", "--direction", "tx")
	out := string(b)
	for _, want := range []string{"tx: the guest sends, the far end receives, over IPv4", ", over IPv6", "tx IPv6 scenario as written", "IPv6 against IPv4"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output", want)
		}
	}
	for i, ip := range []float64{4, 6} {
		if p := points[i]; p["ip"] != ip || p["mbps"].(float64) <= 0 {
			t.Errorf("point %d: ip %v, %v Mbit/s; want IPv%v with a throughput", i, p["ip"], p["mbps"], ip)
		}
	}
	t.Logf("%s", b)
}
