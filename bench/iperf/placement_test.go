package iperf

import (
	"io"
	"strings"
	"testing"
	"time"
)

// --affinity as-written and a moved guest and vm: every point runs once per placement, the
// moved one gives those starts the new rectangles and the next as-written run has the
// scenario's again; bad values are refused with the value named.
func TestAffinityPatch(t *testing.T) {
	const file = "../../deploy/qemu_iperf_vhost_direct.hid"
	sc, err := loadScenario(file)
	if err != nil {
		t.Fatal(err)
	}
	moved := "guest=0+4 vm=1+2,0+1"
	o := Options{Runs: 1, Time: time.Second, Directions: []string{dirRX}, Queues: []int{1}, Affinity: []string{asWritten, moved}}
	matrix, _, err := o.matrix(sc, file, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(matrix) != 2 || matrix[0].place != asWritten || matrix[1].place != moved || matrix[1].pairs != 1 {
		t.Fatalf("matrix %v, want queues=1 as-written and moved", matrix)
	}
	if got := matrix[1].String(); !strings.Contains(got, moved) {
		t.Errorf("setting %q does not name its placement", got)
	}
	// the vm's and the guest's <affinity> in each run's scenario
	asIs := [2]string{`<affinity xpos="1" ypos="0"/>`, `<affinity xpos="3" ypos="1"/>`}
	movedXML := [2]string{`<affinity xpos="1" ypos="0" width="2" height="1"/>`, `<affinity xpos="0" ypos="1" width="4"/>`}
	for _, tc := range []struct {
		m    setting
		want [2]string
	}{
		{matrix[0], asIs},
		{matrix[1], movedXML},
		{matrix[0], asIs},
	} {
		if _, err := sc.patch(tc.m, o); err != nil {
			t.Fatal(err)
		}
		for i, name := range []string{"vm", "guest"} {
			var got []string
			for _, a := range sc.start(name).Subs("affinity") {
				got = append(got, strings.TrimSpace(string(a.XML())))
			}
			if len(got) != 1 || got[0] != tc.want[i] {
				t.Errorf("%s: %s's affinity %q, want %s", tc.m, name, got, tc.want[i])
			}
		}
	}
	for _, bad := range []string{"nobody=0+1", "guest=3+2", "guest=0", "guest=0+0", "vm=0+1,1+2", "", "guest"} {
		sc, err := loadScenario(file)
		if err != nil {
			t.Fatal(err)
		}
		o.Affinity = []string{bad}
		if _, _, err := o.matrix(sc, file, io.Discard); err == nil || !strings.Contains(err.Error(), "--affinity") {
			t.Errorf("--affinity %q: %v, want an error naming it", bad, err)
		}
	}
}
