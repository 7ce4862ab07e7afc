package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testpmd"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/affinity"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// DPDK's virtio-user as the vhost-user front end of two vms with 1, 2 and 4 queue pairs, split
// and packed rings: testpmd sends UDP flows on every queue of vm_tx (txonly, flows varied), nic_router
// forwards them to vm_rx, whose testpmd (icmpecho: it answers the router's ARP) receives them
// on every queue. Sent on a queue counts more than its ring holds, so the back end took them.
func TestTestpmdMultiQueue(t *testing.T) {
	testutil.RequireRoot(t)
	if err := testpmd.Installed(); err != nil {
		testutil.SkipOrFail(t, err.Error())
	}
	for _, queues := range []int{1, 2, 4} {
		for _, packed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d queues %s", queues, map[bool]string{false: "split", true: "packed"}[packed]), func(t *testing.T) {
				testpmdRun(t, queues, packed)
			})
		}
	}
}

func testpmdRun(t *testing.T, queues int, packed bool) {
	huge, err := testpmd.ReserveHugepages(160)
	if err != nil {
		t.Fatal(err)
	}
	defer huge.Release()
	cpus, err := affinity.Current()
	if err != nil {
		t.Fatal(err)
	}
	r, sock1, sock2 := startThrough(t, queues, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func(name, sock string, cpu int, c testpmd.Config) *testpmd.Testpmd {
		c.Name, c.CPUs, c.HugeDir, c.Queues, c.Mbufs = name, []int{cpu}, huge.Dir, queues, 4096
		c.VirtioUser = []testpmd.VirtioUser{{Path: sock, Queues: queues, Packed: packed, InOrder: true}}
		p, err := testpmd.Start(ctx, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		if err := p.StartForwarding(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The receiver answers the router's ARP (icmpecho) and counts the rest per queue.
	rcv := start("mqrx", sock2, cpus[0], testpmd.Config{Forward: testpmd.ICMPEcho})
	snd := start("mqtx", sock1, cpus[len(cpus)-1], testpmd.Config{Forward: testpmd.TxOnly, TxPkts: []int{64},
		EthPeer: testpmd.RouterMAC, TxIP: [2]netip.Addr{testpmd.GenIP, testpmd.SinkIP},
		MultiFlow: true})
	time.Sleep(time.Second) // a bounded load: testpmd sends as fast as it can, for 1 s
	for _, vm := range []string{"vm_tx", "vm_rx"} {
		checkPairsPinned(t, r.Component(vm), queues)
	}
	if _, err := snd.StopForwarding(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	sent, err := snd.Stats()
	if err != nil || len(sent) != 1 || len(sent[0].Queues) != queues {
		t.Fatalf("sender's stats %+v, %v", sent, err)
	}
	got, err := rcv.Stats()
	if err != nil || len(got) != 1 || len(got[0].Queues) != queues {
		t.Fatalf("receiver's stats %+v, %v", got, err)
	}
	for q := range queues {
		s, g := sent[0].Queues[q].TX.Packets, got[0].Queues[q].RX.Packets
		t.Logf("queue %d: sent %d, received %d", q, s, g)
		if s <= 1024 {
			t.Errorf("queue %d sent %d frames: the back end did not take its ring", q, s)
		}
		if g == 0 {
			t.Errorf("queue %d received nothing", q)
		}
	}
	if strings.Contains(r.Logs.String(), "unpinned") {
		t.Error("a vm's queue pairs' readers run unpinned")
	}
	for _, want := range []string{fmt.Sprintf("packed=%v", packed), "in_order=true"} {
		if strings.Count(r.Logs.String(), want) < 2 {
			t.Errorf("the vms' logs do not say %s", want)
		}
	}
	rx := r.Component("vm_rx").Counters
	if r.Component("vm_tx").Counters["vhost_faults"] != 0 || rx["vhost_faults"] != 0 || rx["vhost_tx_frames"] == 0 {
		t.Errorf("vm counters %v, %v: want frames, no fault", r.Component("vm_tx").Counters, rx)
	}
	for _, p := range []*testpmd.Testpmd{snd, rcv} {
		if err := p.Quit(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("%s:\n%s", p.Name, p.Output())
		}
	}
	if t.Failed() {
		t.Logf("nic_router counters %v", r.Component("nic_router").Counters)
	}
}

// checkPairsPinned checks that each of a vm's queue pairs has its thread alone on the pair's
// cpu, the p-th of the vm's (round): each cpu has as many threads pinned to it alone as pairs.
func checkPairsPinned(t *testing.T, vm supervisor.ComponentStatus, queues int) {
	t.Helper()
	if queues == 1 {
		return
	}
	cpus, err := affinity.Parse(vm.CPUs)
	if err != nil || len(cpus) == 0 {
		t.Fatalf("%s's cpus %q: %v", vm.Name, vm.CPUs, err)
	}
	want, alone := map[string]int{}, map[string]int{}
	for p := range queues {
		want[strconv.Itoa(cpus[p%len(cpus)])]++
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", vm.Pid))
	for _, task := range tasks {
		status, err := os.ReadFile(task)
		if err != nil {
			continue // the thread ended
		}
		for line := range strings.Lines(string(status)) {
			if list, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				alone[strings.TrimSpace(list)]++
			}
		}
	}
	for cpu, n := range want {
		if alone[cpu] < n {
			t.Errorf("%s (cpus %s, pid %d): %d threads on cpu %s alone, want one for each of its %d pairs; threads by cpus: %v", vm.Name, vm.CPUs, vm.Pid, alone[cpu], cpu, n, alone)
		}
	}
	t.Logf("%s (cpus %s): threads by cpus %v", vm.Name, vm.CPUs, alone)
}

// startThrough runs testpmd.Through with the vms' sockets in a folder of the test's, each vm
// serving queues pairs (restart: a killed vm starts again), and waits until both listen.
func startThrough(t *testing.T, queues int, restart bool) (r *scenariotest.Run, gen, sink string) {
	t.Helper()
	for _, c := range []string{"vm", "nic_router"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	dir := testutil.ReachableTempDir(t)
	gen, sink = filepath.Join(dir, "vm_tx.sock"), filepath.Join(dir, "vm_rx.sock")
	text := testpmd.Through{GenSock: gen, SinkSock: sink, Queues: queues, CPU: -1, Restart: restart}.XML()
	r = scenariotest.Start(t, "through.xml", text, supervisor.Options{BinDirs: []string{testutil.BinDir(t)}, Components: components.Table})
	for _, s := range []string{gen, sink} {
		waitFile(t, s)
	}
	return r, gen, sink
}
