package main

import (
	"fmt"
	"os"
	"os/exec"
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

// testpmdBinary is DPDK's testpmd as Debian's dpdk package installs it (scripts/deps.sh).
const testpmdBinary = "dpdk-testpmd"

// The vhost-user scenario of the testpmd tests: two vm components whose devices offer
// QUEUES pairs, joined by nic_router; UDP from the first domain to the second is forwarded.
const testpmdScenario = `<config>
	<parent-provides> <service name="LOG"/> </parent-provides>
	<default-route> <any-service> <parent/> <any-child/> </any-service> </default-route>
	<default caps="100" ram="64M"/>
	<start name="nic_router" ram="32M">
		<provides> <service name="Nic"/> <service name="Uplink"/> </provides>
		<config>
			<policy label_prefix="vm1" domain="one"/>
			<policy label_prefix="vm2" domain="two"/>
			<domain name="one" interface="10.0.1.1/24">
				<udp dst="10.0.2.0/24"> <permit-any domain="two"/> </udp>
			</domain>
			<domain name="two" interface="10.0.2.1/24"/>
		</config>
	</start>
	<start name="vm1" ram="128M">
		<binary name="vm"/>
		<route> <service name="Nic"> <child name="nic_router"/> </service> <any-service> <parent/> <any-child/> </any-service> </route>
		<config guest="vhost-user" socket="SOCK1" queues="QUEUES"/>
	</start>
	<start name="vm2" ram="128M">
		<binary name="vm"/>
		<route> <service name="Nic"> <child name="nic_router"/> </service> <any-service> <parent/> <any-child/> </any-service> </route>
		<config guest="vhost-user" socket="SOCK2" queues="QUEUES"/>
	</start>
</config>`

// hugepages reserves pages more 2 MiB pages (the pool grows by that many, so that others'
// reservations stay) on a hugetlbfs mounted in a temporary folder; both are undone when t
// ends. testpmd's virtio-user needs its memory in files it can hand the back end.
func hugepages(t *testing.T, pages int) string {
	t.Helper()
	const nr = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
	count := func() int {
		b, err := os.ReadFile(nr)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	add := func(n int) error { return os.WriteFile(nr, []byte(strconv.Itoa(count()+n)), 0) }
	if err := add(pages); err != nil {
		t.Fatalf("reserving hugepages: %v", err)
	}
	t.Cleanup(func() { add(-pages) })
	dir := t.TempDir()
	if err := unix.Mount("nodev", dir, "hugetlbfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "pagesize=2M"); err != nil {
		t.Fatalf("mounting hugetlbfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) }) // before the pages go back: cleanups run last first
	return dir
}

// testpmd is one DPDK testpmd on a virtio-user port: started, and stopped with SIGINT, after
// which it prints its per-stream (per-queue) statistics.
type testpmd struct {
	cmd    *exec.Cmd
	out    *testutil.SyncBuffer
	exited chan struct{}
}

func startTestpmd(t *testing.T, name, huge, sock string, queues int, packed bool, mode ...string) *testpmd {
	t.Helper()
	vdev := fmt.Sprintf("net_virtio_user0,path=%s,queues=%d,in_order=1,packed_vq=%d", sock, queues, map[bool]int{false: 0, true: 1}[packed])
	if queues > 1 {
		vdev += ",cq=1"
	}
	args := []string{"-l", "0-1", "--no-pci", "--file-prefix", fmt.Sprintf("nicstack-mq-%s-%d", name, os.Getpid()),
		"--huge-dir", huge, "-m", "128", "--single-file-segments", "--vdev", vdev, "--",
		"--nb-cores=1", "--disable-link-check", "--no-lsc-interrupt", fmt.Sprintf("--rxq=%d", queues), fmt.Sprintf("--txq=%d", queues), "--total-num-mbufs=4096"}
	p := &testpmd{out: &testutil.SyncBuffer{}, exited: make(chan struct{})}
	// Line-buffered: testpmd's output to a pipe is otherwise held until it exits.
	p.cmd = exec.Command("stdbuf", append([]string{"-oL", testpmdBinary}, append(args, mode...)...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// Without a command line testpmd forwards until a line (or EOF) on its input: a pipe
	// that stays open keeps it running until SIGINT.
	in, hold, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdin = in
	defer in.Close()
	t.Cleanup(func() { hold.Close() })
	p.cmd.SysProcAttr = &unix.SysProcAttr{Pdeathsig: unix.SIGKILL}
	if err = p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// waitFor waits until testpmd's output holds want.
func (p *testpmd) waitFor(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(p.out.String(), want); time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.exited:
			t.Fatalf("testpmd exited before it said %q:\n%s", want, p.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("testpmd never said %q:\n%s", want, p.out)
		}
	}
}

var streamStats = regexp.MustCompile(`Forward Stats for RX Port= 0/Queue= *(\d+) -> TX Port= 0/Queue= *(\d+) -+\s+RX-packets: (\d+)\s+TX-packets: (\d+)`)

// stop interrupts testpmd and returns each queue's received and sent packets from its
// per-stream statistics (a queue it does not list carried none).
func (p *testpmd) stop(t *testing.T, queues int) (rx, tx []uint64) {
	t.Helper()
	p.cmd.Process.Signal(unix.SIGINT)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("testpmd did not stop:\n%s", p.out)
	}
	rx, tx = make([]uint64, queues), make([]uint64, queues)
	for _, m := range streamStats.FindAllStringSubmatch(p.out.String(), -1) {
		q, _ := strconv.Atoi(m[1])
		if q < queues {
			rx[q], _ = strconv.ParseUint(m[3], 10, 64)
			tx[q], _ = strconv.ParseUint(m[4], 10, 64)
		}
	}
	if queues == 1 { // one stream: only the port's totals
		if m := regexp.MustCompile(`RX-packets: (\d+)\s+RX-dropped: \d+\s+RX-total: \d+`).FindStringSubmatch(p.out.String()); m != nil {
			rx[0], _ = strconv.ParseUint(m[1], 10, 64)
		}
		if m := regexp.MustCompile(`TX-packets: (\d+)\s+TX-dropped: \d+\s+TX-total: \d+`).FindStringSubmatch(p.out.String()); m != nil {
			tx[0], _ = strconv.ParseUint(m[1], 10, 64)
		}
	}
	return rx, tx
}

// DPDK's virtio-user as the vhost-user front end of two vms with 1, 2 and 4 queue pairs, split
// and packed rings: testpmd sends UDP flows on every queue of vm1 (txonly, flows varied), nic_router
// forwards them to vm2, whose testpmd (icmpecho: it answers the router's ARP) receives them
// on every queue. Sent on a queue counts more than its ring holds, so the back end took them.
func TestTestpmdMultiQueue(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, testpmdBinary, "stdbuf")
	for _, queues := range []int{1, 2, 4} {
		for _, packed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d queues %s", queues, map[bool]string{false: "split", true: "packed"}[packed]), func(t *testing.T) {
				testpmdRun(t, queues, packed)
			})
		}
	}
}

func testpmdRun(t *testing.T, queues int, packed bool) {
	huge := hugepages(t, 160)
	dir := testutil.ReachableTempDir(t)
	sock1, sock2 := filepath.Join(dir, "vm1.sock"), filepath.Join(dir, "vm2.sock")
	var bin string
	for _, c := range []string{"vm", "nic_router"} {
		bin = filepath.Dir(testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c))
	}
	text := strings.NewReplacer("SOCK1", sock1, "SOCK2", sock2, "QUEUES", strconv.Itoa(queues)).Replace(testpmdScenario)
	r := scenariotest.Start(t, "testpmd.xml", text, supervisor.Options{BinDirs: []string{bin}, Components: components.Table})
	for _, s := range []string{sock1, sock2} {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if _, err := os.Stat(s); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no socket %s", s)
			}
		}
	}
	rcv := startTestpmd(t, "rx", huge, sock2, queues, packed, "--forward-mode=icmpecho")
	rcv.waitFor(t, "Press enter to exit")
	snd := startTestpmd(t, "tx", huge, sock1, queues, packed, "--forward-mode=txonly",
		"--eth-peer=0,02:02:02:02:02:00", "--tx-ip=10.0.1.2,10.0.2.2", "--txonly-multi-flow", "--txpkts=64")
	snd.waitFor(t, "Press enter to exit")
	time.Sleep(3 * time.Second) // a bounded load: testpmd sends as fast as it can, for 3 s
	_, sent := snd.stop(t, queues)
	time.Sleep(200 * time.Millisecond)
	got, _ := rcv.stop(t, queues)
	t.Logf("sent per queue %v, received per queue %v", sent, got)
	for q := range queues {
		if sent[q] <= 1024 {
			t.Errorf("queue %d sent %d frames: the back end did not take its ring", q, sent[q])
		}
		if got[q] == 0 {
			t.Errorf("queue %d received nothing", q)
		}
	}
	for _, want := range []string{fmt.Sprintf("packed=%v", packed), "in_order=true"} {
		if strings.Count(r.Logs.String(), want) < 2 {
			t.Errorf("the vms' logs do not say %s", want)
		}
	}
	vm2 := r.Component("vm2").Counters
	if r.Component("vm1").Counters["vhost_faults"] != 0 || vm2["vhost_faults"] != 0 || vm2["vhost_tx_frames"] == 0 {
		t.Errorf("vm counters %v, %v: want frames, no fault", r.Component("vm1").Counters, vm2)
	}
	if t.Failed() {
		t.Logf("nic_router counters %v", r.Component("nic_router").Counters)
		t.Logf("sender:\n%s\nreceiver:\n%s", snd.out, rcv.out)
	}
}
