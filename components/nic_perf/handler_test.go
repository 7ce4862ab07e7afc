package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/components/nic_perf/nicperf"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Stop ends the generator of a session still open and returns once its goroutine has ended.
func TestStopEndsRuns(t *testing.T) {
	h := NewHandler(component.New(component.Spec{}, slog.New(slog.DiscardHandler), nil), io.Discard)
	n, err := config.ParseXML("test", []byte(`<config service="Nic" tx="yes" rate="1000" period_ms="0"/>`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Configure(perfConfig(t, n)); err != nil {
		t.Fatal(err)
	}
	cl, srv, err := packetstream.NewHeapSession(packetstream.DefaultConfig(), packetstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	defer srv.Close()
	if err := h.Open(&component.Session{ID: 1, Service: "Nic", Label: "perf -> ", Server: srv, Role: component.Server}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !cl.RX.PacketAvail(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no frame from the generator")
		}
	}
	testutil.Stops(t, h.Stop, -1)
	if len(h.runs) != 0 {
		t.Errorf("%d runs left after Stop", len(h.runs))
	}
}

// Genode's nic_perf_rx: a session its <default-policy> serves, logged each period in
// Genode's words; after count periods the component exits with exit value 0 (Exit then
// stops the handler, as runtime/component's tests pin).
func TestCountPeriodsEndWithExitValueZero(t *testing.T) {
	var out testutil.SyncBuffer
	c := component.New(components.Lookup("nic_perf"), slog.New(slog.DiscardHandler), nil)
	h := NewHandler(c, &out)
	n, err := config.ParseXML("test", []byte(`<config period_ms="100" count="3"> <default-policy> <interface ip="10.0.2.1"/> </default-policy> </config>`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Configure(perfConfig(t, n)); err != nil {
		t.Fatal(err)
	}
	cl, srv, err := packetstream.NewHeapSession(packetstream.DefaultConfig(), packetstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	defer srv.Close()
	if err := h.Open(&component.Session{ID: 1, Service: "Nic", Label: "nic_perf_tx -> ", Server: srv, Role: component.Server}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after 3 periods of 100 ms")
	}
	testutil.Stops(t, h.Stop, -1)
	if c.ExitValue() != 0 {
		t.Errorf("exit value %d", c.ExitValue())
	}
	if n := strings.Count(out.String(), "# Stats for session nic_perf_tx -> \n  Received 0 packets in 100ms at 0.0Mbit/s\n"); n != 3 {
		t.Errorf("%d reports of the session in 3 periods:\n%s", n, out.String())
	}
}

// A session that no <policy> selects, without <default-policy>, is refused, as Genode's
// nic_perf denies it.
func TestSessionWithoutPolicyRefused(t *testing.T) {
	h := NewHandler(component.New(component.Spec{}, slog.New(slog.DiscardHandler), nil), io.Discard)
	n, err := config.ParseXML("test", []byte(`<config period_ms="0"> <policy label="vm -> "/> </config>`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Configure(perfConfig(t, n)); err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	cl, srv, err := packetstream.NewHeapSession(packetstream.DefaultConfig(), packetstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	defer srv.Close()
	err = h.Open(&component.Session{ID: 1, Service: "Nic", Label: "other -> ", Server: srv, Role: component.Server})
	if err == nil || !strings.Contains(err.Error(), `no <policy> selects label "other -> "`) {
		t.Errorf("Open: %v", err)
	}
	if err := h.Open(&component.Session{ID: 2, Service: "Nic", Label: "vm -> ", Server: srv, Role: component.Server}); err != nil {
		t.Errorf("the session its policy selects: %v", err)
	}
}

// perfConfig is n as the table's Parse reads it.
func perfConfig(t *testing.T, n *config.Node) nicperf.Config {
	t.Helper()
	cfg, err := nicperf.ParseConfig(n, "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
