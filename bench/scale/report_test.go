package scale

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The rows' figures line up under the header whatever the names' widths ("8 uplink" beside
// "32 off").
func TestTableAligned(t *testing.T) {
	o := Options{Scenario: "s.hid", Domains: domainsShared, Direction: "tx", Time: 10 * time.Second, Idle: 10 * time.Second, Runs: 1,
		FQCodel: []string{fqUplink, "off"}, FarEndCPU: []string{farEndCPUScenario, farEndCPURouter}}
	var points []Point
	for _, n := range []int{8, 32} {
		for _, fq := range o.FQCodel {
			for _, far := range o.FarEndCPU {
				points = append(points, Point{Guests: n, FQCodel: fq, FarEndCPU: far, Runs: 1, Mbps: 123})
			}
		}
	}
	var out bytes.Buffer
	writeTable(&out, points, o)
	col := -1
	for _, l := range strings.Split(out.String(), "\n") {
		if i := strings.Index(l, "tests' Mbit/s"); i >= 0 {
			col = i
		}
		if i := strings.Index(l, " 123 "); i >= 0 && col >= 0 && i+1 != col {
			t.Errorf("the sum at column %d, the header's at %d:\n%s", i+1, col, out.String())
		}
	}
	if col < 0 {
		t.Fatalf("no header:\n%s", out.String())
	}
	// one growth line and one line of targets per variant
	for _, want := range []string{"fq-codel off, far end router: growth from 8 to 32", "targets at 32 guests, fq-codel uplink, far end scenario: Jain"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}
