package main

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/model"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
)

// The router's MAC on a <nic-client> session is unique among the live ones, also past 256
// sessions (it was the request id's low byte) and across configs that drop and add clients.
func TestNicClientMACsUnique(t *testing.T) {
	h, err := NewHandler(component.New(component.Spec{}, slog.New(slog.DiscardHandler), nil))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	configure := func(first, last int) {
		t.Helper()
		var b strings.Builder
		b.WriteString("config\n+ domain d | interface: 10.0.0.1/24\n")
		for i := first; i < last; i++ {
			fmt.Fprintf(&b, "+ nic-client | label: c%d | domain: d\n", i)
		}
		b.WriteString("-\n")
		n, err := config.Parse("router.hid", []byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Configure(model.Parse(n)); err != nil {
			t.Fatal(err)
		}
		seen := map[header.MAC]uint64{}
		for id := range h.clientOf {
			mac := nicClientMAC(h.clientMAC[id])
			if other, dup := seen[mac]; dup {
				t.Fatalf("requests %d and %d share MAC %v", other, id, mac)
			}
			seen[mac] = id
		}
		if len(seen) != last-first || len(h.macInUse) != last-first {
			t.Fatalf("%d MACs for %d nic-clients (%d in use)", len(seen), last-first, len(h.macInUse))
		}
	}
	configure(0, 300)
	configure(150, 600)
	configure(590, 900)
}

// With every MAC suffix in use, takeMAC says so instead of searching forever, and a released
// suffix is taken again.
func TestNicClientMACsRunOut(t *testing.T) {
	h := &Handler{macInUse: map[uint16]bool{}}
	for range 1<<16 - 1 {
		if _, ok := h.takeMAC(); !ok {
			t.Fatalf("ran out after %d MACs", len(h.macInUse))
		}
	}
	if n, ok := h.takeMAC(); ok {
		t.Fatalf("a 65536th MAC suffix %d", n)
	}
	delete(h.macInUse, 7)
	if n, ok := h.takeMAC(); !ok || n != 7 {
		t.Fatalf("after releasing 7: %d, %v", n, ok)
	}
}
