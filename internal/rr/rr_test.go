package rr

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/iperf"
)

func TestParseCommand(t *testing.T) {
	c, err := ParseCommand(strings.Fields("-c 198.18.0.2 -l 1,1K -t 0.5"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Address() != "198.18.0.2:5210" || len(c.Sizes) != 2 || c.Sizes[1] != 1024 || c.Time != 500*time.Millisecond {
		t.Errorf("parsed %+v", c)
	}
	if c, err := ParseCommand(strings.Fields("-c 2001:db8::2 -6")); err != nil || c.Address() != "[2001:db8::2]:5210" || c.Network() != "tcp6" {
		t.Errorf("-6: %+v, %v", c, err)
	}
	for _, bad := range []string{"", "-s -c 1.2.3.4", "-c h -l 0", "-c h -l 2M", "-c h -t 0", "-s -p 0", "-s extra", "-s -4 -6"} {
		if _, err := ParseCommand(strings.Fields(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestRoundTrips(t *testing.T) {
	ln, err := iperf.Kernel.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, iperf.Kernel, ln) }()
	for _, size := range []int{1, 1024, 100000} {
		r, err := Run(ctx, iperf.Kernel, "tcp", ln.Addr().String(), size, time.Now().Add(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if r.Transactions == 0 || r.P50 <= 0 || r.P50 > r.P99 || r.P99 > r.P999 {
			t.Errorf("%d bytes: %v", size, r)
		}
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := Run(context.Background(), iperf.Kernel, "tcp", ln.Addr().String(), 1, time.Now().Add(time.Second)); err == nil {
		t.Error("a closed server measured")
	}
}

// TestRoundTripsIPv6: an IPv6-only server on ::1 and a client with -6.
func TestRoundTripsIPv6(t *testing.T) {
	c := &Command{Server: true, Version6: true}
	ln, err := iperf.Kernel.Listen(c.Network(), "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = Serve(ctx, iperf.Kernel, ln) }()
	r, err := Run(ctx, iperf.Kernel, "tcp6", ln.Addr().String(), 1024, time.Now().Add(100*time.Millisecond))
	if err != nil || r.Transactions == 0 {
		t.Fatalf("%v, %v", r, err)
	}
	if _, err := iperf.Kernel.Listen(c.Network(), "127.0.0.1:0"); err == nil {
		t.Error("-6 listened on an IPv4 address")
	}
}

func TestPercentiles(t *testing.T) {
	var rtts []time.Duration
	for i := 1000; i >= 1; i-- {
		rtts = append(rtts, time.Duration(i))
	}
	r := summarize(1, rtts)
	if r.P50 != 500 || r.P99 != 990 || r.P999 != 999 || r.Transactions != 1000 {
		t.Errorf("%+v", r)
	}
}
