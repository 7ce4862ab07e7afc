package main

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/qemu"
	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/leftover"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// startQEMUScenario runs deploy/name, the seed topology with a QEMU guest (qemu_iperf.xml over
// the stream socket, qemu_iperf_vhost.xml over vhost-user), with the replacements applied;
// the guest image is built first, once.
func startQEMUScenario(t *testing.T, name string, replace ...string) *scenariotest.Run {
	t.Helper()
	guestImage(t)
	return startScenario(t, name, scenariotest.Deploy(t, name, replace...))
}

// guestImage builds the guest image (once) and probes KVM, before a guest's own boot is
// timed; a scenario's programs get it through qemu.ImageEnv.
func guestImage(t *testing.T) qemu.Image {
	t.Helper()
	testutil.RequireCommand(t, qemu.Binary)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	im, err := qemu.BuildImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	qemu.KVM(im)
	t.Setenv(qemu.ImageEnv, filepath.Dir(im.Kernel))
	return im
}

// startScenario runs text, the seed topology's scenario name with a vm.
func startScenario(t *testing.T, name, text string) *scenariotest.Run {
	t.Helper()
	for _, c := range []string{"vm", "remote_host", "nic_router", "intel_nic_hw", "ipxe_nic"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	return scenariotest.Start(t, name, text, supervisor.Options{BinDirs: []string{testutil.BinDir(t)}, Components: components.Table})
}

// waitLog waits until the run's log holds want n times.
func waitLog(t *testing.T, r *scenariotest.Run, want string, n int) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); strings.Count(r.Logs.String(), want) < n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the log holds %q %d times, want %d", want, strings.Count(r.Logs.String(), want), n)
		}
	}
}

// The supervisor boots QEMU beside the stream guest: the VM takes its lease from nic_router's
// DHCP server and moves an iperf test each way through the NAT to remote_host, then powers
// off; QEMU and the socket are gone after the run.
func TestQEMUGuestOverStream(t *testing.T) {
	both := "--run=nicstack iperf -c 198.18.0.2 -t 2 &amp;&amp; nicstack iperf -c 198.18.0.2 -t 2 -R"
	r := startQEMUScenario(t, "qemu_iperf.xml", "--iperf=-c 198.18.0.2 -R -t 10", both)
	waitLog(t, r, `child \"guest\" exited with exit value 0`, 1)
	logs := r.Logs.String()
	for _, want := range []string{"[guest] NICSTACK-GUEST: lease 10.0.1.", "[guest] NICSTACK-GUEST: exit 0", `[vm] level=INFO msg="peer connected"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
	if n := strings.Count(logs, "receiver\n"); n != 2 {
		t.Errorf("%d iperf results in the guest's log, want 2", n)
	}
	srv := r.Component("remote_host").Counters
	if srv["iperf_tests"] != 2 || srv["iperf_errors"] != 0 {
		t.Errorf("remote_host counters %v: want two tests, no error", srv)
	}
	pid := guestPid(t, logs)
	r.Stop()
	if leftover.Alive(pid) {
		t.Errorf("QEMU (pid %d) outlived the run", pid)
	}
}

// QEMU killed in the middle of a transfer: the vm's session with it ends, the supervisor starts
// the guest again (restart="yes"), and the new QEMU gets a fresh session and a lease.
func TestQEMUKilledMidTransfer(t *testing.T) {
	killMidTransfer(t, "qemu_iperf.xml", "peer", "")
}

// killMidTransfer kills the QEMU of scenario during its iperf and checks that the vm logs the
// end of its session and a second one (what calls the front end: peer), that the restarted
// guest takes a lease, that no counter in faultCounter (if given) counted and no QEMU is left.
func killMidTransfer(t *testing.T, scenario, peer, faultCounter string) {
	r := startQEMUScenario(t, scenario, `<start name="guest" restart="no">`, `<start name="guest" restart="yes">`, "-R -t 10", "-R -t 30")
	waitLog(t, r, "[guest] [  1]   0.00-1.", 1)
	pid := guestPid(t, r.Logs.String())
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitLog(t, r, `[vm] level=INFO msg="`+peer+` disconnected"`, 1)
	waitLog(t, r, `[vm] level=INFO msg="`+peer+` connected" connection=2`, 1)
	waitLog(t, r, "[guest] NICSTACK-GUEST: lease 10.0.1.", 2)
	if strings.Contains(r.Logs.String(), "panic") {
		t.Error("a panic in the log")
	}
	if faultCounter != "" && r.Component("vm").Counters[faultCounter] != 0 {
		t.Errorf("%s: %d", faultCounter, r.Component("vm").Counters[faultCounter])
	}
	pid = guestPid(t, r.Logs.String())
	r.Stop()
	if leftover.Alive(pid) {
		t.Errorf("the second QEMU (pid %d) outlived the run", pid)
	}
}

// guestPid is the pid of the guest's last launch, from the supervisor's log.
func guestPid(t *testing.T, logs string) int {
	t.Helper()
	i := strings.LastIndex(logs, `msg="guest started" pid=`)
	if i < 0 {
		t.Fatal("the guest never started")
	}
	var pid int
	rest := logs[i+len(`msg="guest started" pid=`):]
	for _, c := range rest {
		if c < '0' || c > '9' {
			break
		}
		pid = pid*10 + int(c-'0')
	}
	return pid
}
