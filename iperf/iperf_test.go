package iperf

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
)

// startServer runs our server on a loopback port and returns the port and its reports.
func startServer(t *testing.T) (int, <-chan *Report) {
	t.Helper()
	ln, err := Kernel.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reports := make(chan *Report, 4)
	ctx, cancel := context.WithCancel(context.Background())
	srv := &Server{OnReport: func(r *Report) { reports <- r }, Logf: t.Logf}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().(*net.TCPAddr).Port, reports
}

func TestOurServerWithRealIperf3Client(t *testing.T) {
	testutil.RequireCommand(t, "iperf3")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"forward", nil},
		{"reverse", []string{"-R"}},
		{"parallel", []string{"-P", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port, reports := startServer(t)
			args := append([]string{"-c", "127.0.0.1", "-p", strconv.Itoa(port), "-t", "1", "-J"}, tc.args...)
			out, err := exec.Command("iperf3", args...).Output()
			if err != nil {
				t.Fatalf("iperf3 %v: %v\n%s", args, err, out)
			}
			var r struct {
				Error string `json:"error"`
				End   struct {
					SumSent     struct{ Bytes float64 } `json:"sum_sent"`
					SumReceived struct {
						Bytes         float64 `json:"bytes"`
						BitsPerSecond float64 `json:"bits_per_second"`
					} `json:"sum_received"`
				} `json:"end"`
			}
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("iperf3 JSON: %v\n%s", err, out)
			}
			if r.Error != "" || r.End.SumReceived.BitsPerSecond <= 0 || r.End.SumSent.Bytes <= 0 {
				t.Fatalf("iperf3 measured nothing: %+v\n%s", r, out)
			}
			t.Logf("iperf3 client %v: %.2f Gbit/s received", tc.args, r.End.SumReceived.BitsPerSecond/1e9)
			select {
			case rep := <-reports:
				if rep.Error != "" || len(rep.End.Streams) != len(rep.Start.Connected) || rep.End.SumReceived.Bytes == 0 {
					t.Fatalf("our server's report: %+v", rep)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("our server reported no test")
			}
		})
	}
}

// startIperf3Server runs a real one-off iperf3 server and waits until it listens.
func startIperf3Server(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("iperf3", "-s", "-1", "--forceflush", "-B", "127.0.0.1", "-p", strconv.Itoa(port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	ready := make(chan bool, 1)
	go func() {
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Server listening") {
				ready <- true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("iperf3 -s did not start")
	}
	return port
}

func TestOurClientWithRealIperf3Server(t *testing.T) {
	testutil.RequireCommand(t, "iperf3")
	for _, tc := range []struct {
		name     string
		reverse  bool
		parallel int
	}{
		{"forward", false, 1},
		{"reverse", true, 1},
		{"parallel", false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := startIperf3Server(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rep, err := RunClient(ctx, ClientConfig{Server: "127.0.0.1:" + strconv.Itoa(port), Duration: time.Second,
				Reverse: tc.reverse, Parallel: tc.parallel})
			if err != nil {
				t.Fatal(err)
			}
			checkReport(t, rep, tc.parallel)
		})
	}
}

func checkReport(t *testing.T, rep *Report, streams int) {
	t.Helper()
	if len(rep.End.Streams) != streams || len(rep.Intervals) == 0 {
		t.Fatalf("report has %d streams and %d intervals", len(rep.End.Streams), len(rep.Intervals))
	}
	for _, s := range rep.End.Streams {
		if s.Sender.Bytes == 0 || s.Receiver.Bytes == 0 {
			t.Fatalf("stream %d: sent %d, received %d", s.Sender.Socket, s.Sender.Bytes, s.Receiver.Bytes)
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	end := generic["end"].(map[string]any)
	bps := end["sum_received"].(map[string]any)["bits_per_second"].(float64)
	if bps <= 0 {
		t.Fatalf("sum_received.bits_per_second = %v", bps)
	}
	t.Logf("%.2f Gbit/s received", bps/1e9)
}

func TestOurClientAndServer(t *testing.T) {
	port, reports := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := RunClient(ctx, ClientConfig{Server: "127.0.0.1:" + strconv.Itoa(port), Duration: time.Second, Reverse: true, Parallel: 3})
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, 3)
	if ids := []int{rep.End.Streams[0].Sender.Socket, rep.End.Streams[1].Sender.Socket, rep.End.Streams[2].Sender.Socket}; ids[0] != 1 || ids[1] != 3 || ids[2] != 4 {
		t.Fatalf("stream ids %v, iperf3 numbers 1, 3, 4", ids)
	}
	if srv := <-reports; srv.End.SumSent.Bytes != rep.End.SumSent.Bytes {
		t.Fatalf("server sent %d, client says %d", srv.End.SumSent.Bytes, rep.End.SumSent.Bytes)
	}
}

func TestBusyServerDeniesSecondClient(t *testing.T) {
	port, _ := startServer(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := RunClient(ctx, ClientConfig{Server: addr, Duration: time.Second})
		first <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if _, err := RunClient(ctx, ClientConfig{Server: addr, Duration: time.Second}); err != ErrAccessDenied {
		t.Fatalf("second client: %v, want ErrAccessDenied", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("first client: %v", err)
	}
}
