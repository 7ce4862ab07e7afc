package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/leftover"
	"github.com/nicstack/nicstack/internal/qemu"
	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// vhostUserNetdev turns deploy/qemu_iperf.xml's stream guest into a vhost-user one: the vm
// serves vhost-user on vm.sock, and QEMU shares the guest's memory (a memfd) and connects
// there. The NIC has no MSI-X vectors: QEMU 7.2 under TCG crashes (SIGSEGV in
// msix_set_vector_notifiers, from vhost_net_start) when a vhost-user device starts with them.
var vhostUserNetdev = []string{
	`<config guest="stream" socket="vm.sock"/>`, `<config guest="vhost-user" socket="vm.sock"/>`,
	`<arg value="--netdev=stream,id=net0,server=off,addr.type=unix,addr.path=vm.sock"/>`,
	`<arg value="--netdev=vhost-user,id=net0,chardev=vhu"/> <arg value="--device=virtio-net-pci,netdev=net0,vectors=0"/>
	 <arg value="--qemu-arg=-chardev"/> <arg value="--qemu-arg=socket,id=vhu,path=vm.sock"/>
	 <arg value="--qemu-arg=-object"/> <arg value="--qemu-arg=memory-backend-memfd,id=mem,size=256M,share=on"/>
	 <arg value="--qemu-arg=-numa"/> <arg value="--qemu-arg=node,memdev=mem"/>`,
}

// startVhostUserScenario runs deploy/qemu_iperf.xml with the guest on vhost-user and the
// further replacements applied.
func startVhostUserScenario(t *testing.T, replace ...string) *scenariotest.Run {
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
	for _, c := range []string{"vm", "remote_host", "nic_router", "intel_nic_hw", "ipxe_nic"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	return scenariotest.Start(t, "qemu_iperf.xml", scenariotest.Deploy(t, "qemu_iperf.xml", append(vhostUserNetdev, replace...)...),
		supervisor.Options{BinDirs: []string{testutil.BinDir(t)}, Components: components.Table})
}

// logHolds waits until the run's log holds want n times.
func logHolds(t *testing.T, r *scenariotest.Run, want string, n int) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); strings.Count(r.Logs.String(), want) < n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the log holds %q %d times, want %d:\n%s", want, strings.Count(r.Logs.String(), want), n, r.Logs)
		}
	}
}

// A QEMU guest over vhost-user: QEMU negotiates with the vm's back end, the guest takes its
// lease from nic_router's DHCP server and moves an iperf test each way through the NAT to
// remote_host, with no fault on the device.
func TestQEMUGuestOverVhostUser(t *testing.T) {
	both := "--run=nicstack iperf -c 198.18.0.2 -t 2 &amp;&amp; nicstack iperf -c 198.18.0.2 -t 2 -R"
	r := startVhostUserScenario(t, "--iperf=-c 198.18.0.2 -R -t 10", both)
	logHolds(t, r, `guest\" exited with exit value 0`, 1)
	logs := r.Logs.String()
	for _, want := range []string{"[guest] NICSTACK-GUEST: lease 10.0.1.", "[guest] NICSTACK-GUEST: exit 0", `msg="front end connected"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
	if n := strings.Count(logs, "receiver\n"); n != 2 {
		t.Errorf("%d iperf results in the guest's log, want 2", n)
	}
	vm := r.Component("vm").Counters
	if vm["vhost_faults"] != 0 || vm["vhost_rx_frames"] == 0 || vm["vhost_tx_frames"] == 0 {
		t.Errorf("vm counters %v: want frames both ways, no fault", vm)
	}
	srv := r.Component("remote_host").Counters
	if srv["iperf_tests"] != 2 || srv["iperf_errors"] != 0 {
		t.Errorf("remote_host counters %v: want two tests, no error", srv)
	}
}

// QEMU killed in the middle of a transfer over vhost-user: the vm's device for it ends with
// the connection, the supervisor starts the guest again (restart="yes"), and the new QEMU gets
// a fresh device and a lease; the old one's memory is let go and nothing panics.
func TestQEMUKilledMidTransferOverVhostUser(t *testing.T) {
	r := startVhostUserScenario(t, `<start name="guest" restart="no">`, `<start name="guest" restart="yes">`, "-R -t 10", "-R -t 30")
	logHolds(t, r, "[guest] [  1]   0.00-1.", 1)
	pid := lastPid(t, r.Logs.String(), `msg="guest started" pid=`)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	logHolds(t, r, `[vm] level=INFO msg="front end disconnected"`, 1)
	logHolds(t, r, `[vm] level=INFO msg="front end connected" connection=2`, 1)
	logHolds(t, r, "[guest] NICSTACK-GUEST: lease 10.0.1.", 2)
	if strings.Contains(r.Logs.String(), "panic") || r.Component("vm").Counters["vhost_faults"] != 0 {
		t.Error("a panic or a device fault")
	}
	pid = lastPid(t, r.Logs.String(), `msg="guest started" pid=`)
	r.Stop()
	if leftover.Alive(pid) {
		t.Errorf("the second QEMU (pid %d) outlived the run", pid)
	}
}

// lastPid is the number after the last occurrence of prefix in logs.
func lastPid(t *testing.T, logs, prefix string) int {
	t.Helper()
	i := strings.LastIndex(logs, prefix)
	if i < 0 {
		t.Fatalf("the log lacks %q", prefix)
	}
	rest := logs[i+len(prefix):]
	if j := strings.IndexFunc(rest, func(c rune) bool { return c < '0' || c > '9' }); j >= 0 {
		rest = rest[:j]
	}
	pid, err := strconv.Atoi(rest)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
