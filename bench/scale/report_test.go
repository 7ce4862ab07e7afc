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
	o := Options{Scenario: "s.hid", Domains: domainsShared, Direction: "tx", Time: 10 * time.Second, Idle: 10 * time.Second, Runs: 1, FQCodel: []string{fqUplink, "off"}}
	var points []Point
	for _, n := range []int{8, 32} {
		for _, fq := range o.FQCodel {
			points = append(points, Point{Guests: n, FQCodel: fq, Runs: 1, Mbps: 123})
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
}
