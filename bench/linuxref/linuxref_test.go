package linuxref

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/bench/benchtest"
	"github.com/nicstack/nicstack/internal/qemu"
	"github.com/nicstack/nicstack/internal/testutil"
)

const scenario = "../../deploy/qemu_e1000e.hid"

// The reference takes its addresses from deploy/qemu_e1000e_guest.hid, replaces only the
// guest's command, and the result passes `nicstack check`.
func TestReferenceScenario(t *testing.T) {
	text, g, err := reference(scenario, "rx", 8*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := "--run=guest-linux-router 198.18.0.1/24 10.0.1.1/24 10.0.1.2 -c 198.18.0.2 -t 8 -R"
	if !strings.Contains(string(text), `"`+want+`"`) || strings.Contains(string(text), "guest-scenario") {
		t.Errorf("the guest's command is not %q:\n%s", want, text)
	}
	if g.cpus != 2 || g.exit == nil || !g.exit.Disabled {
		t.Errorf("%d vCPUs, exit %+v: want 2 and the exit disabled", g.cpus, g.exit)
	}
	testutil.Binary(t, "github.com/nicstack/nicstack/cmd/nicstack") // the guest program, next to the components
	benchtest.CheckScenario(t, "linuxref.xml", string(text), "nic_router", "vm", "remote_host")
	if _, _, err := reference(scenario, "both", time.Second); err == nil || !strings.Contains(err.Error(), `"both"`) {
		t.Errorf("direction both: %v, want an error naming it", err)
	}
	if _, _, err := reference("../../deploy/qemu_e1000e_guest.hid", "rx", time.Second); err == nil || !strings.Contains(err.Error(), "guest-scenario") {
		t.Errorf("a scenario without a QEMU guest: %v, want an error saying what is missing", err)
	}
}

func TestParse(t *testing.T) {
	out := `[guest] NICSTACK-GUEST: irq-start 5
[guest] NICSTACK-GUEST: stat-start cpu  20 0 620 545 0 0 15 0 0 0
[remote_host] level=INFO msg="iperf result"
[guest] NICSTACK-GUEST: irq 2305
[guest] NICSTACK-GUEST: stat cpu  70 0 870 945 0 0 115 0 0 0
[guest] NICSTACK-GUEST: nat 2 3
[guest] NICSTACK-GUEST: iperf {"start": {},"end": {"sum_received": {"bits_per_second": 1.5e8},` +
		`"sum_received_bidir_reverse": {"bits_per_second": 2.5e7}}}
[guest] NICSTACK-GUEST: exit 0
`
	r, err := parse(out, 2)
	if err != nil {
		t.Fatal(err)
	}
	// 400 ticks busy of 800 on 2 CPUs: 4 s, one CPU's worth.
	if r.Mbps != 150 || r.BidirReverseMbps != 25 || r.GuestCPU != 100 || r.Seconds != 4 || r.IRQPerSecond != 575 ||
		r.NATPackets != 2 || r.NATConnections != 3 {
		t.Errorf("parse: %+v", r)
	}
	if _, err := parse(strings.Replace(out, "exit 0", "exit 1", 1), 2); err == nil || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("a failed test: %v", err)
	}
	if _, err := parse(strings.Replace(out, "NICSTACK-GUEST: nat", "nat", 1), 2); err == nil || !strings.Contains(err.Error(), "nat") {
		t.Errorf("no nat marker: %v", err)
	}
	if _, err := parse(strings.Replace(out, `"start": {}`, `"error": "connection refused"`, 1), 2); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("an iperf error: %v", err)
	}
}

// TestLinuxReferenceThroughNAT boots the reference of deploy/qemu_e1000e (TCG unless KVM
// works here): Linux's e1000e in the guest, the kernel forwarding and masquerading for the
// vm's namespace, whose iperf --bidir reaches remote_host on the host side. Both directions
// moved data, the connections went through the masquerade rule with the uplink's address as
// their reply's destination, and the run left no process or folder behind.
func TestLinuxReferenceThroughNAT(t *testing.T) {
	testutil.RequireRoot(t)
	bins := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := qemu.BuildScenarioImage(ctx, true); err != nil { // minutes the first time, then cached
		t.Fatal(err)
	}
	folders := func() []string {
		m, _ := filepath.Glob(filepath.Join(os.TempDir(), "nicstack-bench-linuxref-*"))
		return m
	}
	before := folders()
	var logs testutil.SyncBuffer
	defer func() {
		if t.Failed() {
			t.Logf("the run's output:\n%s", logs.String())
		}
	}()
	start := time.Now()
	r, err := Run(ctx, bench.Components{Bins: []string{bins}, Logs: &logs}, scenario, "bidir", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v in %v", r, time.Since(start))
	if r.Mbps <= 0 || r.BidirReverseMbps <= 0 || r.IRQPerSecond <= 0 || r.GuestCPU <= 0 {
		t.Errorf("%+v: want traffic both ways, the e1000e's interrupts and the guest's CPU", r)
	}
	if r.NATPackets == 0 || r.NATConnections == 0 {
		t.Errorf("masqueraded %d packets, %d connections to the uplink's address: the test did not take the kernel's NAT", r.NATPackets, r.NATConnections)
	}
	if left := children(); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
	for _, f := range folders() {
		if !slices.Contains(before, f) {
			t.Errorf("folder left behind: %s", f)
		}
	}
}

// binaries builds what the host side of deploy/qemu_e1000e runs and returns their folder.
func binaries(tb testing.TB) string {
	tb.Helper()
	testutil.RequireCommand(tb, qemu.Binary, "nft", "ethtool")
	var bins string
	for _, p := range []string{"cmd/nicstack", "components/nic_router", "components/vm", "components/remote_host"} {
		bins = filepath.Dir(testutil.Binary(tb, "github.com/nicstack/nicstack/"+p))
	}
	return bins
}

// children are this process's child processes (the components, QEMU).
func children() []string {
	var out []string
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, the last ')' ends it.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			out = append(out, strings.TrimSpace(string(b[:strings.LastIndexByte(string(b), ')')+1])))
		}
	}
	return out
}
