package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// attachRun starts deploy/sculpt_iperf.hid without the vm's iperf test, keeping its
// attachments in stateDir.
func attachRun(t *testing.T, stateDir string) *scenariotest.Run {
	t.Helper()
	var dir string
	for _, c := range []string{"vm", "remote_host", "intel_nic_hw", "ipxe_nic", "nic_router"} {
		dir = filepath.Dir(testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c))
	}
	text := scenariotest.Deploy(t, "sculpt_iperf.hid", " | iperf: -c 198.18.0.2 -R -t 10", "")
	return scenariotest.Start(t, "sculpt_iperf.hid", text, supervisor.Options{
		BinDirs: []string{dir}, Components: components.Table, StateDir: stateDir,
	})
}

// lives is each component's pid and restarts.
func lives(t *testing.T, r *scenariotest.Run) map[string][2]int {
	st, ok := r.S.Status()
	if !ok {
		t.Fatal("the scenario ended")
	}
	out := map[string][2]int{}
	for _, c := range st.Components {
		out[c.Name] = [2]int{c.Pid, c.Restarts}
	}
	return out
}

// A guest attached at run time takes a lease from the router's DHCP server, and
// its detach stops it; neither touches another component. A run that starts again with the
// same state folder brings back what was attached.
func TestAttachEmbeddedGuest(t *testing.T) {
	state := t.TempDir()
	r := attachRun(t, state)
	waitCounters(t, r.S, "vm", "dhcp_leases")
	before := lives(t, r)

	a, err := r.S.Attach(supervisor.Attachment{Name: "vm2", Affinity: "2,0"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Guest != "embedded" || a.Label != "vm2" || a.Router != "nic_router" {
		t.Errorf("attached %+v, want an embedded guest labelled vm2 at nic_router", a)
	}
	waitCounters(t, r.S, "vm2", "dhcp_leases")
	if c := r.Component("vm2"); !c.Attached || c.Binary != "vm" || c.CPUs == "" {
		t.Errorf("vm2's status %+v: want an attached vm", c)
	}
	for _, tc := range []struct {
		a   supervisor.Attachment
		err string
	}{
		{supervisor.Attachment{Name: "vm2"}, "an attachment has that name already"},
		{supervisor.Attachment{Name: "nic_router"}, "the scenario file has that name already"},
		{supervisor.Attachment{Name: "c1"}, `no <policy> of the router selects the label "c1"`},
	} {
		if _, err := r.S.Attach(tc.a); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("attach %+v: %v, want an error with %q", tc.a, err, tc.err)
		}
	}

	if err := r.S.Detach("vm2"); err != nil {
		t.Fatal(err)
	}
	if err := r.S.Detach("vm"); err == nil || !strings.Contains(err.Error(), "not an attachment") {
		t.Errorf("detaching the file's vm: %v", err)
	}
	after := lives(t, r)
	if _, ok := after["vm2"]; ok {
		t.Errorf("vm2 still there after its detach: %v", after)
	}
	for name, life := range before {
		if after[name] != life || life[1] != 0 {
			t.Errorf("%s: pid and restarts %v before, %v after: attach and detach must not touch it", name, life, after[name])
		}
	}

	// Kept across runs: the next run of the same state folder starts with vm3.
	if _, err := r.S.Attach(supervisor.Attachment{Name: "vm3"}); err != nil {
		t.Fatal(err)
	}
	r.Stop()
	again := attachRun(t, state)
	waitCounters(t, again.S, "vm3", "dhcp_leases")
	if c := again.Component("vm3"); !c.Attached {
		t.Errorf("vm3 came back as %+v, want it attached", c)
	}
}
