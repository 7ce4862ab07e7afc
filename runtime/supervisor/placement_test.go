package supervisor

import (
	"fmt"
	"testing"
)

func TestPlace(t *testing.T) {
	for _, tc := range []struct {
		space    string // affinity-space attributes
		affinity string // affinity attributes, "" for none
		topo     *Topology
		cpus     string
		warn     bool
	}{
		// The reference PC: 4 cores x 2 threads, the space as large.
		{`width="4" height="2"`, `xpos="0" ypos="0"`, NewTopology(4, 2), "0", false},
		{`width="4" height="2"`, `xpos="1" ypos="0"`, NewTopology(4, 2), "1", false},
		{`width="4" height="2"`, `xpos="3" ypos="0" height="2"`, NewTopology(4, 2), "3,7", false},
		{`width="4" height="2"`, ``, NewTopology(4, 2), "0-7", false},
		{`width="4" height="2"`, `xpos="2"`, NewTopology(4, 2), "2,6", false}, // absent ypos: the whole column
		// The same scenario on this kind of machine: 2 cores, 1 thread.
		{`width="4" height="2"`, `xpos="0" ypos="0"`, NewTopology(2, 1), "0", false},
		{`width="4" height="2"`, `xpos="1" ypos="0"`, NewTopology(2, 1), "0", false},
		{`width="4" height="2"`, `xpos="3" ypos="0" height="2"`, NewTopology(2, 1), "1", false},
		{`width="4" height="2"`, `xpos="2" width="2"`, NewTopology(2, 1), "1", false},
		// A small space stretched over a big machine.
		{`width="2" height="1"`, `xpos="1"`, NewTopology(4, 2), "2-3,6-7", false},
		{``, ``, NewTopology(4, 2), "0-7", false},
		// Outside the space: warned and given the whole space.
		{`width="2" height="1"`, `xpos="2"`, NewTopology(2, 1), "0-1", true},
	} {
		aff := ""
		if tc.affinity != "" {
			aff = "<affinity " + tc.affinity + "/>"
		}
		space := ""
		if tc.space != "" {
			space = "<affinity-space " + tc.space + "/>"
		}
		sc := mustScenario(t, fmt.Sprintf(`<config>%s<start name="x">%s</start></config>`, space, aff))
		p := Place(sc.Starts[0], sc.Space, tc.topo)
		if p.CPUs.String() != tc.cpus || (p.Warning != "") != tc.warn {
			t.Errorf("space %s affinity %s on %s: cpus %s (warning %q), want %s (warning %v)",
				sc.Space, tc.affinity, tc.topo.Space(), p.CPUs, p.Warning, tc.cpus, tc.warn)
		}
	}
}

func TestScaleNote(t *testing.T) {
	if n := ScaleNote(Space{4, 2}, NewTopology(2, 1)); n == "" {
		t.Error("no note for a 4x2 scenario on a 2x1 machine")
	}
	if n := ScaleNote(Space{2, 1}, NewTopology(2, 1)); n != "" {
		t.Errorf("note for matching spaces: %s", n)
	}
}

// --cpus: N cores, or cores x threads numbered as Linux numbers them.
func TestParseTopology(t *testing.T) {
	for in, want := range map[string]string{"2": "[[0] [1]]", "4x2": "[[0 4] [1 5] [2 6] [3 7]]", "1x1": "[[0]]"} {
		topo, err := ParseTopology(in)
		if err != nil || fmt.Sprint(topo.CPUs) != want {
			t.Errorf("%s: %v %v, want %s", in, topo, err, want)
		}
	}
	for _, in := range []string{"", "0", "x2", "2x", "2x0", "-1", "1025", "two"} {
		if _, err := ParseTopology(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
