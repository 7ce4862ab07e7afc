package main

import (
	"io"
	"log/slog"
	"testing"
	"time"

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
	if err := h.Configure(n); err != nil {
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
