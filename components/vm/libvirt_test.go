package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/libvirt"
	"github.com/nicstack/nicstack/internal/qemu"
	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
)

// A VM as libvirt's users run one: qemu_iperf_vhost without its QEMU program, the vm only
// listening on an absolute socket, and deploy/libvirt's domain defined and started on a
// libvirtd of the test's own (qemu:///system in namespaces of its own). The guest takes its
// lease from nic_router and moves an iperf test each way to remote_host over vhost-user;
// destroyed and undefined, the domain and the daemon leave no process.
func TestLibvirtGuestOverVhostUser(t *testing.T) {
	g := startLibvirtGuest(t, "nicstack iperf -c 198.18.0.2 -t 2 && nicstack iperf -c 198.18.0.2 -t 2 -R")
	out := waitPoweroff(t, g.d, g.name, g.console)
	g.check(out, 1)
	g.stop()
}

// A kill -9 of the vm between the guest's two iperfs: the restarted vm takes over QEMU's
// connection (docs/vms.md, "A back end that crashes"), so the guest's link never drops (its
// carrier_changes stay as they were) and its second iperf runs over the same device. The
// domain's <reconnect> is for what a takeover cannot resume.
func TestLibvirtGuestSurvivesVMKill(t *testing.T) {
	changes := "$(cat /sys/class/net/eth0/carrier_changes)"
	g := startLibvirtGuest(t, "before="+changes+" && nicstack iperf -c 198.18.0.2 -t 2 && sleep 2 && [ "+changes+
		" = $before ] && nicstack iperf -c 198.18.0.2 -t 2 -R")
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if b, _ := os.ReadFile(g.console); strings.Contains(string(b), "receiver") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no first iperf result; console:\n%s", g.d.QEMULog(g.name))
		}
	}
	g.r.WaitRestarted("vm", g.r.Kill("vm"))
	out := waitPoweroff(t, g.d, g.name, g.console)
	g.check(out, 2) // the first connection, and the same one resumed
	if !strings.Contains(g.r.Logs.String(), `msg="front end's connection resumed"`) {
		t.Errorf("the restarted vm did not resume QEMU's connection; log:\n%s", g.r.Logs.String())
	}
	g.stop()
}

// libvirtGuest is a run of qemu_iperf_vhost whose guest is deploy/libvirt's domain.
type libvirtGuest struct {
	t             *testing.T
	r             *scenariotest.Run
	d             *libvirt.Daemon
	name, console string
}

// startLibvirtGuest runs qemu_iperf_vhost without its QEMU program, the vm listening on an
// absolute socket, starts a libvirtd of the test's own and defines and starts deploy/libvirt's
// domain on it, fitted to the test's image, socket and console file, its guest running run.
func startLibvirtGuest(t *testing.T, run string) *libvirtGuest {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "libvirtd", "virsh", "unshare")
	im := guestImage(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "vm.sock")
	text := withoutStart(t, scenariotest.Deploy(t, "qemu_iperf_vhost.xml", `socket="vm.sock"`, `socket="`+socket+`"`), "guest")
	g := &libvirtGuest{t: t, r: startScenario(t, "qemu_iperf_vhost.xml", text),
		name: fmt.Sprintf("nicstack-guest-%d", os.Getpid()), console: filepath.Join(dir, "console.log")}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d, err := libvirt.Start(ctx, filepath.Join(dir, "libvirt"))
	if err != nil {
		t.Fatal(err)
	}
	g.d = d
	t.Cleanup(d.Stop)
	deployed, err := os.ReadFile("../../deploy/libvirt/nicstack-guest.xml")
	if err != nil {
		t.Fatal(err)
	}
	cmdline, err := qemu.Config{Run: run}.Cmdline()
	if err != nil {
		t.Fatal(err)
	}
	domain, err := libvirt.Fit(string(deployed), libvirt.Guest{Name: g.name, KVM: qemu.KVM(im), Kernel: im.Kernel, Initrd: im.Initrd,
		Cmdline: cmdline, Socket: socket, Console: g.console})
	if err != nil {
		t.Fatal(err)
	}
	domainFile := filepath.Join(dir, "domain.xml")
	if err := os.WriteFile(domainFile, []byte(domain), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Virsh(ctx, "define", domainFile); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d.Virsh(ctx, "destroy", g.name)
		d.Virsh(ctx, "undefine", g.name)
	})
	if _, err := d.Virsh(ctx, "start", g.name); err != nil {
		t.Fatalf("%v\nlibvirtd: %s\n%s", err, d.Log(), d.QEMULog(g.name))
	}
	return g
}

// check asserts what the guest's console out and the run show after the guest powered off:
// a lease, exit 0 after two iperf results, frames both ways without a fault on the vm's
// device (since its last start) after sessions front end sessions in all, two tests at
// remote_host.
func (g *libvirtGuest) check(out string, sessions int) {
	t := g.t
	t.Helper()
	t.Logf("the guest's iperf (TCG unless KVM works here):\n%s", grepLines(out, "sender", "receiver"))
	if lease, _ := qemu.FindMarker(out, "lease"); !strings.HasPrefix(lease, "10.0.1.") {
		t.Errorf("lease %q, want one from nic_router's 10.0.1.0/24", lease)
	}
	if code, _ := qemu.FindMarker(out, "exit"); code != "0" {
		t.Errorf("the guest's command exited with %q, want 0", code)
	}
	if n := strings.Count(out, "receiver"); n != 2 {
		t.Errorf("%d iperf results in the guest's console, want 2", n)
	}
	if n := strings.Count(g.r.Logs.String(), `msg="front end connected"`); n != sessions {
		t.Errorf(`the vm's log holds "front end connected" %d times, want %d`, n, sessions)
	}
	vm := g.r.Component("vm").Counters
	if vm["vhost_faults"] != 0 || vm["vhost_rx_frames"] == 0 || vm["vhost_tx_frames"] == 0 {
		t.Errorf("vm counters %v: want frames both ways, no fault", vm)
	}
	srv := g.r.Component("remote_host").Counters
	if srv["iperf_tests"] != 2 || srv["iperf_errors"] != 0 {
		t.Errorf("remote_host counters %v: want two tests, no error", srv)
	}
}

// stop undefines the domain and stops the daemon, and checks that neither its QEMU nor
// libvirtd outlived them.
func (g *libvirtGuest) stop() {
	t := g.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := g.d.Virsh(ctx, "undefine", g.name); err != nil {
		t.Error(err)
	}
	g.d.Stop()
	for _, s := range []string{"guest=" + g.name, g.d.Dir} {
		if pids := libvirt.Processes(s); len(pids) > 0 {
			t.Errorf("processes %v (%s) outlived the daemon", pids, s)
		}
	}
}

// waitPoweroff waits until domain name's guest has run its command and powered off, and
// returns its console.
func waitPoweroff(t *testing.T, d *libvirt.Daemon, name, console string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for {
		b, _ := os.ReadFile(console)
		state, err := d.Virsh(ctx, "domstate", name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(state) == "shut off" {
			if _, ok := qemu.FindMarker(string(b), "exit"); !ok {
				t.Fatalf("the domain ended before its guest's command did; console:\n%s\n%s", b, d.QEMULog(name))
			}
			return string(b)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the guest did not power off: %v; console:\n%s", ctx.Err(), b)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// withoutStart is scenario text without its <start name="name"> ... </start>.
func withoutStart(t *testing.T, text, name string) string {
	t.Helper()
	i := strings.Index(text, `<start name="`+name+`"`)
	j := strings.Index(text[max(i, 0):], "</start>")
	if i < 0 || j < 0 {
		t.Fatalf("the scenario has no start %q", name)
	}
	return text[:i] + text[i+j+len("</start>"):]
}

// grepLines is text's lines that hold one of words.
func grepLines(text string, words ...string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		for _, w := range words {
			if strings.Contains(line, w) {
				b.WriteString(line)
				break
			}
		}
	}
	return b.String()
}
