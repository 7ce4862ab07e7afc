package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// sculptIperf starts deploy/sculpt_iperf.hid (embedded vm -> nic_router with NAT -> emulated
// NIC and driver -> remote_host) with the vm's iperf -R running for secs seconds, reporting
// every 0.1 s into the returned file (the supervisor writes it: the table says the vm may).
func sculptIperf(t *testing.T, secs string) (*scenario, string) {
	t.Helper()
	for _, c := range []string{"vm", "remote_host", "intel_nic_hw", "ipxe_nic"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	report := filepath.Join(t.TempDir(), "iperf.json")
	text := scenariotest.Deploy(t, "sculpt_iperf.hid", "iperf: -c 198.18.0.2 -R -t 10", "iperf: -c 198.18.0.2 -R -t "+secs+" -i 0.1 | report: "+report)
	// The supervisor's own restart back-off (100 ms), as `nicstack run` has it, so that the
	// stall logged is a user's.
	return &scenario{t: t, Run: scenariotest.Start(t, "sculpt_iperf.hid", text, supervisor.Options{
		BinDirs: []string{binDir(t)}, Components: components.Table,
	})}, report
}

// The moonshot of issue 20: kill -9 of nic_router while an iperf runs through its NAT. The
// supervisor restarts it on the state region the killed one kept, the router restores the
// test's two connections (control and data) with their NAT ports, its ARP caches and the
// vm's DHCP lease, and the same TCP connections carry the test to its end without an error.
// The stall is logged, not asserted.
func TestIperfThroughNATSurvivesRouterKill(t *testing.T) {
	sc, report := sculptIperf(t, "5")
	sc.waitCounter("nic_router", "frames_received", 20000) // the test's data flows
	before := sc.sessionsOf("nic_router")
	if len(before) != 2 {
		t.Fatalf("the router serves %v, want the vm's and the driver's sessions", before)
	}
	killed := time.Now()
	pid := sc.Kill("nic_router")
	sc.WaitRestarted("nic_router", pid)
	restarted := time.Since(killed)
	for !sc.reopened("nic_router", before) {
		time.Sleep(5 * time.Millisecond)
	}
	reopened := time.Since(killed)
	rep := sc.IperfReport(report)
	vm := sc.Component("vm").Counters
	if vm["iperf_errors"] != 0 || rep.Error != "" || vm["dhcp_leases"] != 1 {
		t.Fatalf("iperf error %q (%d errors), %d DHCP leases: want the test's end without error, one lease", rep.Error, vm["iperf_errors"], vm["dhcp_leases"])
	}
	if sum := rep.End.SumReceived; sum == nil || sum.Seconds < 4.5 || sum.Bytes == 0 {
		t.Fatalf("the test ended early: %+v", sum)
	}
	logs := sc.Logs.String()
	// The test's two connections, and any the vm tried before the server listened (closed,
	// they linger for 2 MSL).
	m := regexp.MustCompile(`state region: restored.*link_states=(\d+) dropped=0`).FindStringSubmatch(logs)
	restored := 0
	if m != nil {
		restored, _ = strconv.Atoi(m[1])
	}
	if restored < 2 {
		t.Fatalf("the router's log shows %d link states restored, want the test's two connections", restored)
	}
	if n := sc.Component("nic_router").Restarts; n != 1 {
		t.Fatalf("router restarted %d times", n)
	}
	t.Logf("kill -9 nic_router: running again after %v, its sessions open again after %v, iperf stalled %v (scenariotest.IperfStall of 0.1 s intervals), %.0f Mbit/s over the test",
		restarted.Round(time.Millisecond), reopened.Round(time.Millisecond), scenariotest.IperfStall(rep).Round(time.Millisecond), rep.End.SumReceived.BitsPerSecond/1e6)
}

// sessionsOf lists the open sessions server serves, by client and label.
func (sc *scenario) sessionsOf(server string) map[string]uint64 {
	st, ok := sc.S.Status()
	if !ok {
		sc.t.Fatal("the scenario ended")
	}
	out := map[string]uint64{}
	for _, c := range st.Components {
		for _, r := range c.Requests {
			if r.Server == server && r.State == "open" {
				out[c.Name+" "+r.Label] = r.Session
			}
		}
	}
	return out
}

// reopened reports whether every session of before is open again, as a new one.
func (sc *scenario) reopened(server string, before map[string]uint64) bool {
	now := sc.sessionsOf(server)
	for k, id := range before {
		if now[k] == 0 || now[k] == id {
			return false
		}
	}
	return true
}

// A state region that was changed behind the router's back is discarded with a log line; the
// restarted router runs as a new one would.
func TestCorruptStateRegionRouterRuns(t *testing.T) {
	sc, _ := sculptIperf(t, "3")
	sc.waitCounter("nic_router", "frames_received", 2000)
	mem := stateRegion(t, "nic_router")
	for k := range mem { // every byte: the header and each record's
		mem[k] ^= 0x5a
	}
	pid := sc.Kill("nic_router")
	sc.WaitRestarted("nic_router", pid)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(sc.Logs.String(), "state region discarded") {
		if time.Now().After(deadline) {
			t.Fatal("no log line of the discarded region")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(sc.Logs.String(), "state region: restored") {
		t.Fatal("a corrupt region was restored")
	}
	// The new process routes: the vm's segments that the killed one left unanswered.
	sc.waitCounter("nic_router", "frames_sent", 1)
}

// stateRegion maps component name's state region through the supervisor's descriptor of it
// (the supervisor runs in the test's process).
func stateRegion(t *testing.T, name string) []byte {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		path := filepath.Join("/proc/self/fd", e.Name())
		if target, _ := os.Readlink(path); !strings.Contains(target, "nicstack-state-"+name) {
			continue
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Munmap(mem) })
		return mem
	}
	t.Fatalf("the supervisor holds no state region of %s", name)
	return nil
}
