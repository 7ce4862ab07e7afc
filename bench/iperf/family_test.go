package iperf

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// --ip 4,6 on deploy/linux_tap_1500.hid: the matrix has every direction once per IP version;
// an IPv6 point's netns client goes to the far end's address6 with -6, an IPv4 point's to the
// address as written; the ratio line pairs each IPv6 point with its IPv4 twin.
func TestFamilies(t *testing.T) {
	sc, err := loadScenario("../../deploy/linux_tap_1500.hid")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Runs: 1, Time: time.Second, Directions: []string{dirRX, dirTX}, IPs: []string{"4", "6"}}
	matrix, _, err := o.matrix(sc, "linux_tap_1500.hid", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range matrix {
		names = append(names, m.String())
	}
	if got := strings.Join(names, ", "); got != "rx scenario as written, tx scenario as written, rx IPv6 scenario as written, tx IPv6 scenario as written" {
		t.Fatalf("matrix %s", got)
	}
	c := sc.clients[0]
	for _, tc := range []struct {
		m      setting
		target string
		v6     bool
	}{{matrix[2], "2001:db8:ffff::2", true}, {matrix[0], "198.18.0.2", false}} {
		if _, err := sc.patch(tc.m, o); err != nil {
			t.Fatal(err)
		}
		if c.cmd.Client != tc.target || c.cmd.Version6 != tc.v6 {
			t.Errorf("%s: client to %s, -6 %v; want %s, %v", tc.m, c.cmd.Client, c.cmd.Version6, tc.target, tc.v6)
		}
	}
	if c.cmd.Version6 = true; !strings.Contains(clientCommand(c.cmd), " -6") {
		t.Errorf("client command %q: want -6", clientCommand(c.cmd))
	}

	points := []point{{Direction: dirRX, IP: ipv4, Runs: 2, Mbps: 1000, MbpsRuns: []float64{1000, 1100}},
		{Direction: dirRX, IP: ipv6, Runs: 2, Mbps: 900, MbpsRuns: []float64{900, 1100}}}
	var out bytes.Buffer
	writeFamilyRatios(&out, points)
	if want := "IPv6    900 / IPv4   1000 Mbit/s = 0.90 (rounds 0.90-1.00)"; !strings.Contains(out.String(), want) {
		t.Errorf("ratios:\n%s\nwant %q", out.String(), want)
	}

	for _, bad := range []Options{{IPs: []string{"5"}}, {IPs: []string{"6"}, Compare: []string{"kernel"}}} {
		bad.Runs, bad.Directions = 1, []string{dirRX}
		if _, _, err := bad.matrix(sc, "linux_tap_1500.hid", io.Discard); err == nil {
			t.Errorf("%+v: want an error", bad)
		}
	}
	sd, err := loadScenario("../../deploy/sculpt_iperf_direct.hid")
	if err != nil {
		t.Fatal(err)
	}
	o.Directions = []string{dirRX}
	if _, _, err := o.matrix(sd, "sculpt_iperf_direct.hid", io.Discard); err == nil || !strings.Contains(err.Error(), "has no IPv6 address") {
		t.Errorf("an IPv4-only far end: %v, want it named", err)
	}
}
