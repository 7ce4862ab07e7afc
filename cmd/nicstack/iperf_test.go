package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/internal/rr"
)

func TestIperfCommandJSON(t *testing.T) {
	ln, err := iperf.Kernel.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&iperf.Server{OneOff: true}).Serve(ctx, ln)

	freshCommand(t, ctx, "iperf")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"iperf", "-c", "127.0.0.1", "-p", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "-t", "1", "-R", "-P", "2", "-J"})
	defer root.SetArgs(nil)
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("nicstack iperf: %v\n%s", err, out.String())
	}
	var r struct {
		Start struct {
			TestStart struct {
				NumStreams int `json:"num_streams"`
				Reverse    int `json:"reverse"`
			} `json:"test_start"`
		} `json:"start"`
		Intervals []json.RawMessage `json:"intervals"`
		End       struct {
			SumSent     struct{ Bytes float64 } `json:"sum_sent"`
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if r.Start.TestStart.NumStreams != 2 || r.Start.TestStart.Reverse != 1 || len(r.Intervals) == 0 ||
		r.End.SumSent.Bytes == 0 || r.End.SumReceived.BitsPerSecond == 0 {
		t.Fatalf("unexpected report: %+v", r)
	}
}

// TestIperfAndRRCommandsIPv6: `nicstack iperf -c ::1 -6` against an IPv6-only server, its
// JSON naming ::1 at both ends, and `nicstack rr -6` against an rr server on ::1.
func TestIperfAndRRCommandsIPv6(t *testing.T) {
	ln, err := iperf.Kernel.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&iperf.Server{OneOff: true}).Serve(ctx, ln)

	freshCommand(t, ctx, "iperf")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"iperf", "-c", "::1", "-6", "-p", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "-t", "1", "-J"})
	defer root.SetArgs(nil)
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("nicstack iperf -6: %v\n%s", err, out.String())
	}
	var r struct {
		Start struct {
			Connected []struct {
				Local  string `json:"local_host"`
				Remote string `json:"remote_host"`
			} `json:"connected"`
		} `json:"start"`
		End struct {
			SumSent struct{ Bytes float64 } `json:"sum_sent"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if len(r.Start.Connected) != 1 || r.Start.Connected[0].Local != "::1" || r.Start.Connected[0].Remote != "::1" || r.End.SumSent.Bytes == 0 {
		t.Fatalf("unexpected report: %+v", r)
	}

	rrLn, err := iperf.Kernel.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	go rr.Serve(ctx, iperf.Kernel, rrLn)
	freshCommand(t, ctx, "rr")
	out.Reset()
	root.SetArgs([]string{"rr", "-c", "::1", "-6", "-p", strconv.Itoa(rrLn.Addr().(*net.TCPAddr).Port), "-l", "1", "-t", "0.2"})
	if err := root.ExecuteContext(ctx); err != nil || !strings.Contains(out.String(), "1 bytes: ") {
		t.Fatalf("nicstack rr -6: %v\n%s", err, out.String())
	}
}

// TestIperfCommandText runs `nicstack iperf -c` with the options users type against our server,
// and reads iperf3's lines back.
func TestIperfCommandText(t *testing.T) {
	ln, err := iperf.Kernel.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&iperf.Server{OneOff: true}).Serve(ctx, ln)

	freshCommand(t, ctx, "iperf")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"iperf", "-c", "127.0.0.1", "-p", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "-t", "1",
		"-u", "-b", "10M", "-l", "1K", "--bidir", "--get-server-output"})
	defer root.SetArgs(nil)
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("nicstack iperf: %v\n%s", err, out.String())
	}
	for _, want := range []string{"[ ID][Role] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n",
		"][TX-C]   0.00-1.00   sec  ", " Mbits/sec  0.000 ms  0/", "  sender\n", "\nServer output:\n", "\niperf Done.\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}

// freshCommand sets a subcommand's flags back to their defaults and gives it ctx: the tests run
// it more than once in one process, and it keeps both from the last run.
func freshCommand(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	cmd, _, err := root.Find([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	cmd.SetContext(ctx)
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		_ = f.Value.Set(f.DefValue)
		f.Changed = false
	})
}
