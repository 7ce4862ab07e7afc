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
	writeComparison(&out, []point{{Mbps: 15000, Direction: dirRX, Runs: 1}}, reference{"kernel", 65000}, point{Direction: dirRX, Mbps: 30000, MbpsRuns: []float64{30000}}, nil)
	if !strings.Contains(out.String(), "kernel@65000, same topology in namespaces, rx: 30000 Mbit/s") ||
		!strings.Contains(out.String(), "15000 Mbit/s = 0.50 x kernel@65000") {
		t.Errorf("comparison:\n%s", out.String())
	}
	if g := gbitPerCPUSecond(12000, (point{CPU: map[string]float64{"a": 50, "b": 25}, EndsCPU: 75}).pathCPU()); g != 8 {
		t.Errorf("12000 Mbit/s at 150 %% of a CPU: %v Gbit per CPU-second, want 8", g)
	}
	// References measured in every round: their median, and the range of the rounds' ratios.
	out.Reset()
	p := point{Mbps: 15000, MbpsRuns: []float64{12000, 15000, 16000}, Direction: dirRX, Runs: 3, GbitPerCPUSecond: 9}
	writeComparison(&out, []point{p}, reference{"pasta", 0}, point{Direction: dirRX, Mbps: 10000, MbpsRuns: []float64{10000, 12000, 8000}}, []float64{6, 5, 7})
	if !strings.Contains(out.String(), "rx: 10000 Mbit/s (median of 3 runs, 8000-12000), 6.0 Gbit per CPU-second") ||
		!strings.Contains(out.String(), "15000 Mbit/s = 1.50 x pasta (its MTU 65520) (rounds 1.20-2.00); 9.0 Gbit per CPU-second = 1.50 x") {
		t.Errorf("comparison of 3 rounds:\n%s", out.String())
	}
}
