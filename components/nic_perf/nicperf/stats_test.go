package nicperf

import (
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/config"
)

// Floats print as Genode's print(float) prints them: decimals cut, not rounded, at most three,
// ending at the first that leaves nothing (so 2.5 shows a trailing zero).
func TestGenodeFloat(t *testing.T) {
	for _, c := range []struct {
		v    float32
		want string
	}{
		{0, "0.0"}, {3, "3.0"}, {2.5, "2.50"}, {0.125, "0.125"}, {41.4959, "41.495"}, {1234.9999, "1234.999"}, {-1.5, "-1.50"},
	} {
		if got := genodeFloat(c.v); got != c.want {
			t.Errorf("genodeFloat(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

// A period's report names each session and gives its packets and throughput in Genode's
// words, then starts its stats over.
func TestReportInGenodesWords(t *testing.T) {
	var r Registry
	tx, rx := &Stats{}, &Stats{}
	r.Add("nic-client", tx)
	r.Add("nic_perf_tx -> ", rx)
	tx.txFrames.Store(17290)
	tx.txBytes.Store(17290 * 1500)
	tx.rxFrames.Store(2)
	tx.rxBytes.Store(2 * 42)
	rx.rxFrames.Store(10)
	rx.rxBytes.Store(15000)
	var out strings.Builder
	r.Report(&out, 5*time.Second)
	want := "# Stats for session nic-client\n" +
		"  Received 2 packets in 5000ms at 0.000Mbit/s\n" + // 0.0001344, cut
		"  Sent     17290 packets in 5000ms at 41.495Mbit/s\n" + // 41.496 in float32, cut to 41.495

		"# Stats for session nic_perf_tx -> \n" +
		"  Received 10 packets in 5000ms at 0.024Mbit/s\n" +
		"  Sent     0 packets in 5000ms at 0.0Mbit/s\n"
	if out.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", out.String(), want)
	}
	r.Remove(rx)
	out.Reset()
	r.Report(&out, 5*time.Second)
	if want := "# Stats for session nic-client\n  Received 0 packets in 5000ms at 0.0Mbit/s\n  Sent     0 packets in 5000ms at 0.0Mbit/s\n"; out.String() != want {
		t.Errorf("second report (stats started over, rx removed):\n%s", out.String())
	}
}

// After count periods nic_perf exits with exit value 0, having reported each period once.
func TestCountPeriodsThenExitValueZero(t *testing.T) {
	var r Registry
	r.Add("nic-client", &Stats{})
	var out testutil.SyncBuffer
	exits := make(chan int, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(5*time.Millisecond, 3, &out, nil, func(code int) { exits <- code })
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after 3 periods")
	}
	if len(exits) != 1 || <-exits != 0 {
		t.Error("Run did not exit once with exit value 0")
	}
	if n := strings.Count(out.String(), "# Stats for session nic-client"); n != 3 {
		t.Errorf("%d reports in 3 periods:\n%s", n, out.String())
	}

	// Forever (the older form's count 0): it reports until stopped and never exits.
	stop := make(chan struct{})
	done = make(chan struct{})
	go func() {
		defer close(done)
		r.Run(time.Millisecond, Forever, &out, stop, func(code int) { exits <- code })
	}()
	for deadline := time.Now().Add(10 * time.Second); strings.Count(out.String(), "# Stats") < 10; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no reports with count 0")
		}
	}
	close(stop)
	<-done
	if len(exits) != 0 {
		t.Error("count 0 exited")
	}
}

// A later config retimes a running nic_perf as Genode's reads it: an absent period_ms or
// count keeps the running period or the periods left; a count starts the periods over; count
// 0 runs no periods.
func TestRetimeAsGenode(t *testing.T) {
	retime := func(text string) func(time.Duration, int) (time.Duration, int) {
		n, err := config.Parse("retime.xml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := parseGenode(n)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Retime
	}
	for _, c := range []struct {
		config     string
		period     time.Duration
		left       int
		wantPeriod time.Duration
		wantLeft   int
	}{
		{`<config period_ms="20"/>`, 5 * time.Second, 7, 20 * time.Millisecond, 7},
		{`<config count="3"/>`, 5 * time.Second, 7, 5 * time.Second, 3},
		{`<config/>`, time.Second, 0, time.Second, 0},
	} {
		p, left := retime(c.config)(c.period, c.left)
		if p != c.wantPeriod || left != c.wantLeft {
			t.Errorf("%s on (%v, %d): (%v, %d), want (%v, %d)", c.config, c.period, c.left, p, left, c.wantPeriod, c.wantLeft)
		}
	}

	// count 0: no periods, until a config gives it a count; then they run with the period
	// the first config gave.
	var r Registry
	r.Add("nic-client", &Stats{})
	var out testutil.SyncBuffer
	exits := make(chan int, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(time.Millisecond, 0, &out, nil, func(code int) { exits <- code })
	}()
	time.Sleep(20 * time.Millisecond)
	if out.String() != "" {
		t.Errorf("count 0 reported:\n%s", out.String())
	}
	r.Retime(retime(`<config count="2"/>`))
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the config's 2 periods")
	}
	if n := strings.Count(out.String(), "Received 0 packets in 1ms"); n != 2 || len(exits) != 1 {
		t.Errorf("%d reports of 1 ms, %d exits, want 2 and 1:\n%s", n, len(exits), out.String())
	}
}
