package scale

import (
	"math"
	"os"
	"strings"
	"testing"
)

func TestJain(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{100, 100, 100, 100}, 1},
		{[]float64{400, 0, 0, 0}, 0.25},         // one has everything: 1/n
		{[]float64{300, 100}, 0.8},              // (400)² / (2 · 100000)
		{[]float64{1, 2, 3, 4, 5}, 225.0 / 275}, // (15)² / (5 · 55)
		{nil, 0},
		{[]float64{0, 0}, 0},
	} {
		if got := Jain(tc.xs); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Jain(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

func TestParsePSS(t *testing.T) {
	const rollup = `00400000-7fffee1e9000 ---p 00000000 00:00 0                              [rollup]
Rss:               29404 kB
Pss:               12806 kB
Pss_Dirty:         10588 kB
Pss_Anon:          10132 kB
`
	got, err := parsePSS(strings.NewReader(rollup))
	if err != nil || got != 12806<<10 {
		t.Errorf("parsePSS = %d, %v; want %d (Pss, not Pss_Dirty or Pss_Anon)", got, err, 12806<<10)
	}
	for _, bad := range []string{"Rss: 1 kB\n", "Pss: 1 MB\n", "Pss: x kB\n"} {
		if _, err := parsePSS(strings.NewReader(bad)); err == nil {
			t.Errorf("parsePSS(%q): no error", bad)
		}
	}
	if pss, err := PSS(os.Getpid()); err != nil || pss == 0 {
		t.Errorf("PSS of this process: %d, %v", pss, err)
	}
}
