package iperf

import (
	"strings"
	"testing"
)

// --compare takes a reference with or without an MTU and names both in its output; anything
// else is refused with the flag's value.
func TestCompareReference(t *testing.T) {
	for in, want := range map[string]string{
		"kernel": "kernel (veth MTU 1500)", "pasta": "pasta (its MTU 65520)",
		"kernel@65000": "kernel@65000", "pasta@1500": "pasta@1500",
		"qemu-user": "qemu-user (QEMU's slirp)", "qemu-tap": "qemu-tap (TAP, kernel NAT)",
	} {
		r, err := parseReference(in)
		if err != nil || r.String() != want {
			t.Errorf("parseReference(%q) = %v, %v; want %s", in, r, err, want)
		}
	}
	for _, in := range []string{"slirp", "kernel@", "kernel@jumbo", "pasta@100", "kernel@70000", "@1500", "qemu-user@1500"} {
		if _, err := parseReference(in); err == nil || !strings.Contains(err.Error(), in) {
			t.Errorf("parseReference(%q): err %v, want one naming it", in, err)
		}
	}
	var out strings.Builder
	writeComparison(&out, []point{{Mbps: 15000, Direction: dirRX, Runs: 1}}, dirRX, reference{"kernel", 65000}, 30000)
	if !strings.Contains(out.String(), "kernel@65000, same topology in namespaces, rx: 30000 Mbit/s") ||
		!strings.Contains(out.String(), "15000 Mbit/s = 0.50 x kernel@65000") {
		t.Errorf("comparison:\n%s", out.String())
	}
}
