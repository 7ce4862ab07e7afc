package qemu

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/internal/testutil"
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
