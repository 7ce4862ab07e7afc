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
	for _, bad := range []string{"", "-s -c 1.2.3.4", "-c h -l 0", "-c h -l 2M", "-c h -t 0", "-s -p 0", "-s extra"} {
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
		r, err := Run(ctx, iperf.Kernel, ln.Addr().String(), size, time.Now().Add(100*time.Millisecond))
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
	if _, err := Run(context.Background(), iperf.Kernel, ln.Addr().String(), 1, time.Now().Add(time.Second)); err == nil {
		t.Error("a closed server measured")
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
