package main

import (
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/components/intel_nic_hw/intelhw"
	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/intel/devsession"
	"github.com/nicstack/nicstack/drivers/ipxe"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Stop ends the interrupt loop, the uplink loop and the CPU tracking while the device and the
// Uplink sessions are still open, and returns once they are gone.
func TestStopEndsLoops(t *testing.T) {
	files, err := devsession.NewFiles(ipxe.DMASize)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	cfg := packetstream.DefaultConfig()
	far, wire, err := packetstream.NewHeapSession(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer far.Close()
	defer wire.Close()
	nic := intelhw.New(intel.DeviceConfig{MAC: nicMAC, Autoneg: time.Millisecond}, intel.NewCounters(nil), intelhw.NewCounters(nil))
	if err := nic.AttachWire(wire); err != nil {
		t.Fatal(err)
	}
	defer nic.DetachWire()
	if err := nic.OpenDevice(files); err != nil {
		t.Fatal(err)
	}
	defer nic.CloseDevice()
	upCli, router, err := packetstream.NewHeapSession(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer upCli.Close()
	defer router.Close()

	before := runtime.NumGoroutine()
	h := NewHandler(component.New(components.Lookup("ipxe_nic"), slog.New(slog.DiscardHandler), nil))
	nicCfg, err := ipxe.ParseConfig(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Configure(nicCfg); err != nil {
		t.Fatal(err)
	}
	if err := h.Open(&component.Session{ID: 1, Service: "Platform", Files: files, Role: component.Client}); err != nil {
		t.Fatal(err)
	}
	var req uint64
	for deadline := time.Now().Add(5 * time.Second); req == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no Uplink request: the link did not come up")
		}
		h.mu.Lock()
		req = h.uplink
		h.mu.Unlock()
	}
	if err := h.Open(&component.Session{ID: 2, Request: req, Service: "Uplink", Client: upCli, Role: component.Client}); err != nil {
		t.Fatal(err)
	}
	testutil.Stops(t, h.Stop, before)
}
