package iperf

import (
	"encoding/json"
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
		"passt": "passt (QEMU's stream socket)", "relay": "relay (one process, TAP to TAP, MTU 1500)",
		"relay@65000": "relay@65000",
	} {
		r, err := parseReference(in)
		if err != nil || r.String() != want {
			t.Errorf("parseReference(%q) = %v, %v; want %s", in, r, err, want)
		}
	}
	for _, in := range []string{"slirp", "kernel@", "kernel@jumbo", "pasta@100", "kernel@70000", "@1500", "qemu-user@1500", "passt@1500", "relay@9"} {
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
	// A QEMU reference's processes, each with its CPU.
	out.Reset()
	qp := point{Direction: dirTX, Mbps: 700, MbpsRuns: []float64{700}, CPU: map[string]float64{"qemu": 98, "passt": 41, machine: 180}}
	writeComparison(&out, []point{{Mbps: 2100, Direction: dirTX, Runs: 1}}, reference{"passt", 0}, qp, nil)
	if !strings.Contains(out.String(), "passt (QEMU's stream socket), the same QEMU guest, tx: 700 Mbit/s\n"+
		"  CPU while the guest's iperf ran, % of one CPU (medians): machine 180 passt 41 qemu 98\n") ||
		!strings.Contains(out.String(), "2100 Mbit/s = 3.00 x passt") {
		t.Errorf("comparison with processes' CPU:\n%s", out.String())
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

// --json carries a reference as a point naming it, with its processes' CPU.
func TestReferenceJSON(t *testing.T) {
	b, err := json.Marshal(point{Reference: "passt", Direction: dirRX, Runs: 3, Mbps: 900, CPU: map[string]float64{"qemu": 98, "passt": 41, machine: 180}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"reference":"passt"`, `"direction":"rx"`, `"cpu":{"machine":180,"passt":41,"qemu":98}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s: no %s", b, want)
		}
	}
	if b, _ := json.Marshal(point{}); strings.Contains(string(b), "reference") {
		t.Errorf("a scenario's point names a reference: %s", b)
	}
}
