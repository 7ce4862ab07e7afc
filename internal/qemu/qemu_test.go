package qemu

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/iperf"
)

// TestGuestUserNetwork boots the guest on QEMU's user networking (no root): it takes slirp's
// lease and moves an iperf test each way to a server on the host's loopback (slirp's
// 10.0.2.2), then powers off.
func TestGuestUserNetwork(t *testing.T) {
	testutil.RequireCommand(t, Binary)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	im, err := BuildImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := iperf.Kernel.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go (&iperf.Server{}).Serve(ctx, ln)
	port := ln.Addr().(*net.TCPAddr).AddrPort().Port()
	client := "nicstack iperf -c 10.0.2.2 -t 1 -p " + strconv.Itoa(int(port))
	var console testutil.SyncBuffer
	vm, err := Start(Config{Image: im, Netdev: "user,id=" + NetID, Run: client + " && " + client + " -R"}, &console)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	lease, err := vm.Lease(ctx)
	if err != nil || !strings.HasPrefix(lease, "10.0.2.15/24 via 10.0.2.2") {
		t.Fatalf("lease %q, %v\n%s", lease, err, console.String())
	}
	code, err := vm.Wait(ctx)
	if err != nil || code != 0 {
		t.Fatalf("guest's iperf: exit %d, %v\n%s", code, err, console.String())
	}
	if n := strings.Count(console.String(), "  receiver"); n != 2 {
		t.Fatalf("%d iperf results, want 2\n%s", n, console.String())
	}
}

// A marker is found behind other text on its line (a log's prefix, kernel messages), its name
// whole: "stat" is not "stat-start" nor "status".
func TestFindMarker(t *testing.T) {
	text := "[guest] NICSTACK-GUEST: status {}\n[guest] NICSTACK-GUEST: stat-start cpu 1\r\n[   2.1] x NICSTACK-GUEST: stat cpu 2\r\n"
	for what, want := range map[string]string{"stat-start": "cpu 1", "stat": "cpu 2", "status": "{}"} {
		if got, ok := FindMarker(text, what); !ok || got != want {
			t.Errorf("%s: %q, %v; want %q", what, got, ok, want)
		}
	}
	if _, ok := FindMarker(text, "exit"); ok {
		t.Error("found a marker the text does not have")
	}
}
