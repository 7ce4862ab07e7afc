package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/netns"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// attachRun starts deploy/sculpt_iperf.hid without the vm's iperf test and with the parent's
// Tap service, keeping its attachments in stateDir.
func attachRun(t *testing.T, stateDir string) *scenariotest.Run {
	t.Helper()
	var dir string
	for _, c := range []string{"vm", "remote_host", "intel_nic_hw", "ipxe_nic", "nic_router"} {
		dir = filepath.Dir(testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c))
	}
	text := scenariotest.Deploy(t, "sculpt_iperf.hid", " | iperf: -c 198.18.0.2 -R -t 10", "",
		"  + service LOG\n", "  + service LOG\n  + service Tap\n")
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

// A netns guest attached into a namespace the run did not make (as a container's): its TAP
// goes there, a connection from it reaches remote_host through the router, and when the namespace goes the guest is
// detached with a log line.
func TestAttachNetnsGuest(t *testing.T) {
	testutil.RequireRoot(t)
	ns, err := netns.New("attach")
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			ns.Close()
		}
	})
	r := attachRun(t, "")
	waitCounters(t, r.S, "vm", "dhcp_leases")
	if _, err := r.S.Attach(supervisor.Attachment{Name: "vm_c1", Guest: "netns", Netns: ns.File.Name(), Address: "10.0.1.50/24", Gateway: "10.0.1.1"}); err != nil {
		t.Fatal(err)
	}
	reachRemote(t, ns)
	if _, err := r.S.Attach(supervisor.Attachment{Name: "vm_c2", Guest: "netns", Netns: "/run/netns/nicstack-no-such-ns", Address: "10.0.1.51/24"}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("attaching into a namespace that is not there: %v", err)
	}

	ns.Close()
	closed = true
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(r.Logs.String(), "vm_c1 detached: its namespace "+ns.File.Name()+" vanished"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("vm_c1 not detached when its namespace went")
		}
	}
	st, _ := r.S.Status()
	for _, c := range st.Components {
		if c.Name == "vm_c1" {
			t.Errorf("vm_c1 still runs: %+v", c)
		}
	}
	// The name the run gave the namespace goes with the guest's session.
	named := filepath.Join("/run/netns", fmt.Sprintf("nsa%d-vm_c1*", os.Getpid()))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left, _ := filepath.Glob(named)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v stays after the detach", left)
		}
	}
}

// A tap guest's interface comes up unconfigured, for what owns the namespace; configured
// there by hand, it reaches remote_host through the router.
func TestAttachTapGuest(t *testing.T) {
	testutil.RequireRoot(t)
	ns, err := netns.New("attach")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	r := attachRun(t, "")
	waitCounters(t, r.S, "vm", "dhcp_leases")
	if _, err := r.S.Attach(supervisor.Attachment{Name: "vm_t1", Guest: "tap", Netns: ns.File.Name(), Ifname: "eth0"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err := ns.Exec("ip", "-4", "-o", "addr", "show", "dev", "eth0", "up")
		if err == nil {
			if strings.TrimSpace(string(out)) != "" {
				t.Fatalf("the tap guest's interface has an address: %s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no eth0 up in the namespace: %v", err)
		}
	}
	if err := ns.IP("addr", "add", "10.0.1.60/24", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	if err := ns.IP("route", "add", "default", "via", "10.0.1.1"); err != nil {
		t.Fatal(err)
	}
	reachRemote(t, ns)
}

// reachRemote connects from ns to remote_host's iperf server, through the router's NAT,
// trying for 30 s while the guest's interface comes up.
func reachRemote(t *testing.T, ns *netns.NS) {
	t.Helper()
	dial := func() error {
		c, err := net.DialTimeout("tcp", "198.18.0.2:5201", time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := ns.Do(dial)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection from %s to remote_host: %v", ns.Name, err)
		}
	}
}
