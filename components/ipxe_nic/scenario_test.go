package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/drivers/ipxe"
	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// deploy/nic_loop.xml with real processes: ipxe_nic driving intel_nic_hw through a device
// session, nic_router, and two nic_perfs, one behind the router, one at the cable's far end.

type run struct {
	*scenariotest.Run
	t *testing.T
}

func startLoop(t *testing.T) *run {
	for _, c := range []string{"intel_nic_hw", "ipxe_nic", "nic_router", "nic_perf"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	bins := filepath.Dir(testutil.Binary(t, "github.com/nicstack/nicstack/components/ipxe_nic"))
	return &run{t: t, Run: scenariotest.Start(t, "nic_loop.xml", scenariotest.Deploy(t, "nic_loop.xml"),
		supervisor.Options{BinDirs: []string{bins}, WatchInterval: 50 * time.Millisecond})}
}

// uplinkOpen reports whether ipxe_nic holds an open Uplink session.
func (r *run) uplinkOpen() bool {
	for _, q := range r.Component("ipxe_nic").Requests {
		if q.Service == "Uplink" && q.State == "open" {
			return true
		}
	}
	return false
}

// waitFor polls cond for up to 30 s (start-up is slow on a loaded machine).
func (r *run) waitFor(what string, cond func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatalf("waited 30 s for %s", what)
		}
	}
}

// grows waits until the counters of both nic_perfs have grown by n frames.
func (r *run) grows(n uint64) {
	r.t.Helper()
	lan0, remote0 := r.Component("lan").Counters["rx_frames"], r.Component("remote").Counters["rx_frames"]
	r.waitFor("frames both ways", func() bool {
		return r.Component("lan").Counters["rx_frames"] >= lan0+n && r.Component("remote").Counters["rx_frames"] >= remote0+n
	})
}

// checkQueues checks that component reports the hops named, each sane: no more than a ring
// holds, only what waits has bytes and an age, and frames have an Ethernet frame's bytes
// (an ack queue reports frames only).
func (r *run) checkQueues(component string, hops ...string) {
	r.t.Helper()
	c := r.Component(component)
	got := map[string]bool{}
	for _, q := range c.Queues {
		got[q.Hop] = true
		if q.Frames > ipxe.RingSize || q.Sojourn < 0 || (q.Frames == 0 && (q.Bytes != 0 || q.Sojourn != 0)) ||
			q.Frames != 0 && !strings.HasSuffix(q.Hop, " acks") && (q.Bytes < 60*q.Frames || q.Bytes > 1522*q.Frames) {
			r.t.Errorf("%s: queue %+v", component, q)
		}
	}
	for _, h := range hops {
		if !got[h] {
			r.t.Errorf("%s reports no queue %q: %+v", component, h, c.Queues)
		}
	}
}

func TestNICLoop(t *testing.T) {
	r := startLoop(t)
	r.waitFor("the Uplink session", r.uplinkOpen)
	r.grows(500) // wire -> model -> driver -> router -> lan, and back

	hw, drv := r.Component("intel_nic_hw").Counters, r.Component("ipxe_nic").Counters
	if hw["rx_frames"] == 0 || hw["tx_frames"] == 0 || hw["interrupts"] == 0 || hw["doorbells"] == 0 {
		t.Errorf("model counters %v", hw)
	}
	if drv["interrupts"] == 0 || drv["rx_frames"] == 0 || drv["tx_frames"] == 0 || drv["tdt_writes"] == 0 {
		t.Errorf("driver counters %v", drv)
	}
	r.checkQueues("ipxe_nic", "tx ring", "rx ring", "ipxe_nic -> uplink tx", "ipxe_nic -> uplink tx acks")
	r.checkQueues("intel_nic_hw", "wire rx")

	// pull the cable while traffic runs: link down, the Uplink session goes
	r.Edit(`carrier="yes"`, `carrier="no"`)
	r.waitFor("the Uplink session to close", func() bool { return !r.uplinkOpen() })
	// plug it back in: link up, a new Uplink session, frames again
	r.Edit(`carrier="no"`, `carrier="yes"`)
	r.waitFor("the Uplink session to reopen", r.uplinkOpen)
	r.grows(500)
	if n := r.Component("ipxe_nic").Counters["link_changes"]; n < 3 {
		t.Errorf("driver saw %d link changes, want up, down, up", n)
	}
}
