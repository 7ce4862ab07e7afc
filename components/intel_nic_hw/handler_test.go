package main

import (
	"log/slog"
	"runtime"
	"testing"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/intel/devsession"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Stop ends the device's goroutines and the wire's clocking while a driver and a far end
// still hold their sessions, and returns once they are gone.
func TestStopEndsDeviceAndWire(t *testing.T) {
	h := NewHandler(component.New(components.Lookup("intel_nic_hw"), slog.New(slog.DiscardHandler), nil))
	nicCfg, err := intel.ParseConfig(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Configure(nicCfg); err != nil {
		t.Fatal(err)
	}
	files, err := devsession.NewFiles(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	cfg := packetstream.DefaultConfig()
	far, srv, err := packetstream.NewHeapSession(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer far.Close()
	defer srv.Close()

	before := runtime.NumGoroutine()
	if err := h.Open(&component.Session{ID: 1, Service: "Platform", Label: "ipxe_nic -> ", Files: files, Role: component.Server}); err != nil {
		t.Fatal(err)
	}
	if err := h.Open(&component.Session{ID: 2, Service: "Nic", Label: "far -> ", Server: srv, Role: component.Server}); err != nil {
		t.Fatal(err)
	}
	if runtime.NumGoroutine() <= before {
		t.Fatal("no device or wire goroutine started")
	}
	testutil.Stops(t, h.Stop, before)
	if h.nic.Device() != nil {
		t.Error("the device runs on after Stop")
	}
}
