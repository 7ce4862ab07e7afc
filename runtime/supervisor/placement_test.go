package supervisor

import (
	"fmt"
	"testing"
)

// fakeTopology is cores x threads with CPU numbers as Linux numbers hyperthreads: the second
// thread of core c is CPU c+cores.
func fakeTopology(cores, threads int) *Topology {
	t := &Topology{}
	for c := 0; c < cores; c++ {
		var cpus []int
		for h := 0; h < threads; h++ {
			cpus = append(cpus, c+h*cores)
		}
		t.CPUs = append(t.CPUs, cpus)
	}
	return t
}

func TestPlace(t *testing.T) {
	for _, tc := range []struct {
		space    string // affinity-space attributes
		affinity string // affinity attributes, "" for none
		topo     *Topology
		cpus     string
		warn     bool
	}{
		// The reference PC: 4 cores x 2 threads, the space as large.
		{`width="4" height="2"`, `xpos="0" ypos="0"`, fakeTopology(4, 2), "0", false},
		{`width="4" height="2"`, `xpos="1" ypos="0"`, fakeTopology(4, 2), "1", false},
		{`width="4" height="2"`, `xpos="3" ypos="0" height="2"`, fakeTopology(4, 2), "3,7", false},
		{`width="4" height="2"`, ``, fakeTopology(4, 2), "0-7", false},
		{`width="4" height="2"`, `xpos="2"`, fakeTopology(4, 2), "2,6", false}, // absent ypos: the whole column
		// The same scenario on this kind of machine: 2 cores, 1 thread.
		{`width="4" height="2"`, `xpos="0" ypos="0"`, fakeTopology(2, 1), "0", false},
		{`width="4" height="2"`, `xpos="1" ypos="0"`, fakeTopology(2, 1), "0", false},
		{`width="4" height="2"`, `xpos="3" ypos="0" height="2"`, fakeTopology(2, 1), "1", false},
		{`width="4" height="2"`, `xpos="2" width="2"`, fakeTopology(2, 1), "1", false},
		// A small space stretched over a big machine.
		{`width="2" height="1"`, `xpos="1"`, fakeTopology(4, 2), "2-3,6-7", false},
		{``, ``, fakeTopology(4, 2), "0-7", false},
		// Outside the space: warned and given the whole space.
		{`width="2" height="1"`, `xpos="2"`, fakeTopology(2, 1), "0-1", true},
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
	if n := ScaleNote(Space{4, 2}, fakeTopology(2, 1)); n == "" {
		t.Error("no note for a 4x2 scenario on a 2x1 machine")
	}
	if n := ScaleNote(Space{2, 1}, fakeTopology(2, 1)); n != "" {
		t.Errorf("note for matching spaces: %s", n)
	}
}
