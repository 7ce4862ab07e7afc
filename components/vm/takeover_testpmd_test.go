package main

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testpmd"
	"github.com/nicstack/nicstack/internal/testutil"
)

// The sink's vm killed with -9 while a testpmd generator sends through nic_router to a testpmd
// sink (icmpecho: it answers the router's ARP and counts the rest): the restarted vm resumes
// the connection, and the same testpmd process keeps counting received frames. The stall (the
// longest time the sink's count stood still, sampled every 20 ms) is logged, not asserted.
func TestVMKilledUnderTestpmd(t *testing.T) {
	testutil.RequireRoot(t)
	if err := testpmd.Installed(); err != nil {
		testutil.SkipOrFail(t, err.Error())
	}
	h, err := testpmd.ReserveHugepages(2 * 64 / 2)
	if err != nil {
		testutil.SkipOrFail(t, err.Error())
	}
	defer h.Release()
	r, src, sink := startThrough(t, 1, true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rx, err := testpmd.Start(ctx, testpmd.Config{Name: "sink", CPUs: []int{1}, HugeDir: h.Dir, MemMB: 64, Forward: testpmd.ICMPEcho,
		VirtioUser: []testpmd.VirtioUser{{Path: sink}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Kill()
	tx, err := testpmd.Start(ctx, testpmd.Config{Name: "gen", CPUs: []int{0}, HugeDir: h.Dir, MemMB: 64, Forward: testpmd.TxOnly,
		TxPkts: []int{64}, EthPeer: testpmd.RouterMAC, TxIP: [2]netip.Addr{testpmd.GenIP, testpmd.SinkIP},
		VirtioUser: []testpmd.VirtioUser{{Path: src}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Kill()
	for _, p := range []*testpmd.Testpmd{rx, tx} {
		if err := p.StartForwarding(); err != nil {
			t.Fatal(err)
		}
	}
	received := func() uint64 {
		t.Helper()
		s, err := rx.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return s[0].RX.Packets
	}
	waitCount := func(above uint64) uint64 {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if n := received(); n > above {
				return n
			}
			if time.Now().After(deadline) {
				t.Fatalf("the sink counted no more than %d frames; log:\n%s", above, r.Logs.String())
			}
		}
	}
	before := waitCount(1000)
	old := r.Kill("vm_rx")
	killed := time.Now()
	var stall time.Duration
	last, lastChange := received(), killed
	resumedAt := uint64(0) // the count when the new process ran, 0 before
	for deadline := killed.Add(60 * time.Second); resumedAt == 0 || last < resumedAt+1000; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the sink counted %d frames before the kill and %d after; log:\n%s", before, last, r.Logs.String())
		}
		if n := received(); n != last {
			stall = max(stall, time.Since(lastChange))
			last, lastChange = n, time.Now()
		}
		if c := r.Component("vm_rx"); resumedAt == 0 && c.State == "running" && c.Pid != 0 && c.Pid != old {
			resumedAt = last
		}
	}
	after := last
	t.Logf("the sink counted %d frames before the kill, %d after it; the longest stand-still of its count: %v", before, after, stall)
	// virtio-user does not reconnect: counting again means the connection lived on.
	logs := r.Logs.String()
	if !strings.Contains(logs, `[vm_rx] level=INFO msg="front end's connection resumed"`) || strings.Contains(logs, "cannot be resumed") {
		t.Errorf("the restarted sink did not resume the connection; log:\n%s", logs)
	}
}

// waitFile waits until path exists: the supervisor listens there.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket at %s", path)
		}
	}
}
