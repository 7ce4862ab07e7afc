package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/qemu"
	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// guestRun is one run of deploy/qemu_e1000e: the output, and remote_host's counters.
type guestRun struct {
	logs   string
	server map[string]uint64
}

// runGuest runs deploy/qemu_e1000e with the replacements (old, new pairs) until the guest
// exits, and stops it. linuxE1000e boots the image with Debian's generic kernel and Linux's
// e1000e driver (qemu.BuildScenarioImage).
func runGuest(tb testing.TB, linuxE1000e bool, replace ...string) guestRun {
	tb.Helper()
	testutil.RequireCommand(tb, qemu.Binary)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	im, err := qemu.BuildScenarioImage(ctx, linuxE1000e) // minutes the first time, then cached
	if err != nil {
		tb.Fatal(err)
	}
	tb.Setenv(qemu.ImageEnv, filepath.Dir(im.Kernel)) // the guest program need not ask the script again
	var dir string
	for _, p := range []string{"cmd/nicstack", "components/nic_router", "components/vm", "components/remote_host"} {
		dir = filepath.Dir(testutil.Binary(tb, "github.com/nicstack/nicstack/"+p))
	}
	// The test ends the run itself, and sees the guest's exit value in its output.
	text := scenariotest.Deploy(tb, "qemu_e1000e.hid", append([]string{"  + exit | propagate: yes\n", ""}, replace...)...)
	r := scenariotest.Start(tb, "qemu_e1000e.hid", text, supervisor.Options{
		BinDirs: []string{dir}, Components: components.Table, // the table tells the QEMU program from components
	})
	for deadline := time.Now().Add(4 * time.Minute); !strings.Contains(r.Logs.String(), qemu.Marker+"exit "); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("the guest did not finish within 4 minutes; output:\n%s", r.Logs.String())
		}
	}
	server := r.Component("remote_host").Counters
	r.Stop()
	return guestRun{logs: r.Logs.String(), server: server}
}

// marker is the rest of the line of the guest's marker what.
func (g guestRun) marker(tb testing.TB, what string) string {
	tb.Helper()
	i := strings.Index(g.logs, qemu.Marker+what+" ")
	if i < 0 {
		tb.Fatalf("the guest printed no %s; output:\n%s", what, g.logs)
	}
	line, _, _ := strings.Cut(g.logs[i+len(qemu.Marker+what+" "):], "\n")
	return line
}

// cpuBusy reads /proc/stat's first line (as the guest printed it): the CPU time spent, and
// all, in clock ticks.
func cpuBusy(tb testing.TB, line string) (busy, total float64) {
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		tb.Fatalf("not /proc/stat's cpu line: %q", line)
	}
	for i, v := range f[1:] {
		var n float64
		fmt.Sscan(v, &n)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// guestCPU is the guest's CPU load between two /proc/stat lines in percent of one CPU.
func guestCPU(tb testing.TB, start, end string, cpus int) float64 {
	b0, t0 := cpuBusy(tb, start)
	b1, t1 := cpuBusy(tb, end)
	return (b1 - b0) / max(t1-t0, 1) * float64(cpus) * 100
}

// status finds the status the guest printed as marker (guest-scenario's "status" or
// "status-start").
func (g guestRun) status(tb testing.TB, marker string) supervisor.Status {
	tb.Helper()
	var st supervisor.Status
	line := g.marker(tb, marker)
	if err := json.Unmarshal([]byte(line), &st); err != nil {
		tb.Fatalf("the guest's %s %q: %v", marker, line, err)
	}
	return st
}

// componentIn is a component's status in st.
func componentIn(st supervisor.Status, name string) supervisor.ComponentStatus {
	for _, c := range st.Components {
		if c.Name == name {
			return c
		}
	}
	return supervisor.ComponentStatus{}
}

// TestQEMUe1000eThroughVFIO runs deploy/qemu_e1000e: a QEMU guest (TCG unless KVM works
// here) whose e1000e, QEMU's independent model of the 82574L, ipxe_nic drives through VFIO
// behind an intel-iommu, with nic_router and an embedded vm inside the guest; the vm's iperf
// --bidir reaches remote_host on the host side through the e1000e's stream netdev. The driver
// saw its link at 1000 Mbit/s and moved data both ways, the iperf test had no error, and the
// run's end stops QEMU.
func TestQEMUe1000eThroughVFIO(t *testing.T) {
	g := runGuest(t, false)
	drv := componentIn(g.status(t, "status"), "nic_drv").Counters
	t.Logf("nic_drv in the guest: %v", drv)
	if g.server["iperf_tests"] != 1 || g.server["iperf_errors"] != 0 || drv["rx_bytes"] < 1<<20 || drv["tx_bytes"] < 1<<20 || drv["interrupts"] == 0 {
		t.Errorf("remote_host's iperf counters %v, nic_drv's %v: want a test without errors and a MiB each way", g.server, drv)
	}
	for _, want := range []string{
		`[guest] [nic_drv] level=INFO msg="link up" speed_mbit=1000`,
		`[guest] [nic_drv] level=INFO msg="device opened"`,
		qemu.Marker + "exit 0",
	} {
		if !strings.Contains(g.logs, want) {
			t.Errorf("no %q in the output:\n%s", want, g.logs)
		}
	}
	t.Logf("iperf --bidir through ipxe_nic on QEMU's e1000e: %.1f Mbit/s", float64(g.server["iperf_bits_per_second"])/1e6)
}

// BenchmarkQEMUe1000e is the seed's matrix on QEMU's e1000e: rx_irq_throttle 0, 651 and 5580
// with tx_batch yes and no, each a boot of deploy/qemu_e1000e with the guest's vm running
// iperf -R (remote_host sends, the driver receives) for 8 s; then the reference, the same
// guest (Debian's generic kernel, for both) with Linux's e1000e driving the NIC and
// `nicstack iperf` on the kernel's sockets (no forwarding or NAT: busybox has no iptables).
// It prints throughput, interrupts per second, TX doorbells per 1000 TX frames, RX frames per
// interrupt, the guest's components' CPU and the whole guest's, between the measurement's two
// ends. One invocation:
//
//	go test ./components/ipxe_nic -run '^$' -bench QEMUe1000e -benchtime 1x
func BenchmarkQEMUe1000e(b *testing.B) {
	const seconds, cpus = 8, 2
	const scenarioRun = "--run=guest-scenario /etc/nicstack/qemu_e1000e_guest.hid dhcp.lease iperf.result 180 0000:00:02.0"
	type point struct{ itr, batch string }
	fmt.Printf("%-14s %8s %7s %10s %6s %8s %10s %6s %7s   (iperf -R %d s; CPU in %% of one of the guest's %d vCPUs; TCG unless KVM works)\n",
		"driver ITR tx", "Mbit/s", "irq/s", "TDT/kframe", "rx/irq", "nic_drv", "nic_router", "vm", "guest", seconds, cpus)
	for range b.N {
		for _, p := range []point{{"0", "yes"}, {"651", "yes"}, {"5580", "yes"}, {"0", "no"}, {"651", "no"}, {"5580", "no"}} {
			run := fmt.Sprintf("--run=sed -e 's/rx_irq_throttle: 651/rx_irq_throttle: %s/' -e 's/tx_batch: yes/tx_batch: %s/' "+
				"-e 's/-t 3 --bidir/-t %d -R/' /etc/nicstack/qemu_e1000e_guest.hid >/tmp/s.hid && "+
				"guest-scenario /tmp/s.hid dhcp.lease iperf.result 180 0000:00:02.0", p.itr, p.batch, seconds)
			g := runGuest(b, true, scenarioRun, run)
			start, end := g.status(b, "status-start"), g.status(b, "status")
			d0, d1 := componentIn(start, "nic_drv"), componentIn(end, "nic_drv")
			delta := func(name string) float64 { return float64(d1.Counters[name] - d0.Counters[name]) }
			cpu := func(name string) float64 {
				return (componentIn(end, name).CPUSeconds - componentIn(start, name).CPUSeconds) / seconds * 100
			}
			fmt.Printf("%-14s %8.1f %7.0f %10.0f %6.1f %7.0f%% %9.0f%% %5.0f%% %6.0f%%\n",
				"ipxe_nic "+p.itr+" "+p.batch, float64(g.server["iperf_bits_per_second"])/1e6, delta("interrupts")/seconds,
				delta("tdt_writes")*1000/max(delta("tx_frames"), 1), delta("rx_frames")/max(delta("interrupts"), 1),
				cpu("nic_drv"), cpu("nic_router"), cpu("vm"), guestCPU(b, g.marker(b, "stat-start"), g.marker(b, "stat"), cpus))
		}
		irqs := "$(awk '/eth0/ {s+=$2+$3} END {print s}' /proc/interrupts)" // no pipe: | splits a HID line
		g := runGuest(b, true, scenarioRun, "--run=ip addr add 198.18.0.1/24 dev eth0 && ip link set eth0 up && sleep 4 && "+
			"echo NICSTACK-GUEST: irq-start "+irqs+" && echo NICSTACK-GUEST: stat-start $(head -1 /proc/stat) && "+
			fmt.Sprintf("nicstack iperf -c 198.18.0.2 -R -t %d && ", seconds)+
			"echo NICSTACK-GUEST: irq "+irqs+" && echo NICSTACK-GUEST: stat $(head -1 /proc/stat)")
		var i0, i1 float64
		fmt.Sscan(g.marker(b, "irq-start"), &i0)
		fmt.Sscan(g.marker(b, "irq"), &i1)
		fmt.Printf("%-14s %8.1f %7.0f %10s %6s %8s %10s %6s %6.0f%%\n", "linux e1000e",
			float64(g.server["iperf_bits_per_second"])/1e6, (i1-i0)/seconds, "-", "-", "-", "-", "-",
			guestCPU(b, g.marker(b, "stat-start"), g.marker(b, "stat"), cpus))
	}
}
