package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// `nicstack attach` and `detach` on a named run of sculpt_iperf (the vm without its test): the
// attached guest shows in status, a bad request is refused, and a supervisor killed with -9
// and started again under the same name brings the guest back.
func TestAttachDetachCommands(t *testing.T) {
	for _, c := range []string{"vm", "remote_host", "intel_nic_hw", "ipxe_nic", "nic_router"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	bin := testutil.BinDir(t)
	tmp := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", tmp) // where a non-root run's instance folder goes
	t.Setenv("TMPDIR", tmp)
	scenario := filepath.Join(tmp, "sculpt_iperf.hid")
	text := scenariotest.Deploy(t, "sculpt_iperf.hid", " | iperf: -c 198.18.0.2 -R -t 10", "")
	if err := os.WriteFile(scenario, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("test-attach-%d", os.Getpid())
	socket, err := supervisor.InstanceSocket(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(socket)) })
	nicstack := func(args ...string) (string, error) {
		b, err := exec.Command(filepath.Join(bin, "nicstack"), args...).CombinedOutput()
		return string(b), err
	}
	start := func() *exec.Cmd {
		run := exec.Command(filepath.Join(bin, "nicstack"), "run", "--name", name, scenario)
		out, _ := os.OpenFile(filepath.Join(tmp, "out.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		run.Stdout, run.Stderr = out, out
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			run.Process.Kill()
			run.Wait()
			if t.Failed() {
				b, _ := os.ReadFile(out.Name())
				t.Logf("nicstack output:\n%s", b)
			}
		})
		return run
	}
	// leased waits until component took its DHCP lease.
	leased := func(component string) supervisor.Status {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			st, err := supervisor.QueryStatus(socket)
			for _, c := range st.Components {
				if err == nil && c.Name == component && c.Counters["dhcp_leases"] > 0 {
					return st
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s took no lease: %+v %v", component, st, err)
			}
		}
	}

	run := start()
	leased("vm")
	if got, err := nicstack("attach", "-s", name, "vm2", "--affinity", "2,0"); err != nil || !strings.Contains(got, `vm2 attached: embedded guest, label "vm2" at nic_router`) {
		t.Fatalf("attach: %v\n%s", err, got)
	}
	if got, err := nicstack("attach", "-s", name, "c1"); err == nil || !strings.Contains(got, `no <policy> of the router selects the label "c1"`) {
		t.Errorf("attach with a label no policy selects: %v\n%s", err, got)
	}
	leased("vm2")
	if got, err := nicstack("status", "-s", name); err != nil || !strings.Contains(got, "vm2 (attached)") {
		t.Errorf("status does not mark vm2 attached: %v\n%s", err, got)
	}

	// A crash of the supervisor: the next run of the name starts with vm2.
	run.Process.Kill()
	run.Wait()
	start()
	st := leased("vm2")
	for _, c := range st.Components {
		if c.Name == "vm2" && !c.Attached {
			t.Errorf("vm2 came back unmarked: %+v", c)
		}
	}
	if got, err := nicstack("detach", "-s", name, "vm2"); err != nil || !strings.Contains(got, "vm2 detached") {
		t.Fatalf("detach: %v\n%s", err, got)
	}
	if got, err := nicstack("detach", "-s", name, "vm"); err == nil || !strings.Contains(got, "not an attachment") {
		t.Errorf("detaching a start of the file: %v\n%s", err, got)
	}
	if got, _ := nicstack("status", "-s", name); strings.Contains(got, "vm2") {
		t.Errorf("vm2 still in the status after its detach:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(socket), "attachments.json")); !os.IsNotExist(err) {
		t.Errorf("the record of the detached guest stays: %v", err)
	}
}
