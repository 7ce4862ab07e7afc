package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strconv"
	"testing"

	"github.com/nicstack/nicstack/iperf"
)

func TestIperfCommandJSON(t *testing.T) {
	ln, err := iperf.Kernel.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&iperf.Server{OneOff: true}).Serve(ctx, ln)

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
