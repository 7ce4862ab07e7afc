package iperf

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
)

// startServer runs our server on a loopback port and returns the port and its reports.
func startServer(t *testing.T, srv *Server) (int, <-chan *Report) {
	t.Helper()
	ln, err := Kernel.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reports := make(chan *Report, 4)
	ctx, cancel := context.WithCancel(context.Background())
	srv.OnReport = func(r *Report) { reports <- r }
	srv.Logf = t.Logf
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

// TestOurClientAndServer runs the options against ourselves, where no iperf3 is needed, and
// checks that both sides agree on what moved.
func TestOurClientAndServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		args string
	}{
		{"tcp", "-t 1 -P 3 -R"},
		{"bidir", "-t 1 --bidir -b 1G"},
		{"udp", "-t 1 -u -b 50M -P 2"},
		{"udp-bidir", "-t 1 -u -b 10M --bidir --udp-counters-64bit"},
		{"omit", "-t 1 -O 1 -b 1G -i 0.5"},
		{"bytes", "-n 10M -R -b 200M"},
		{"blocks", "-k 100 -b 100M"},
		{"server-output", "-t 1 --get-server-output -b 100M"},
		{"zerocopy", "-t 1 -Z -R -b 1G"},
		{"slow", "-t 1 -b 100K"}, // one block in 10 s: halting must not wait for the next
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			port, reports := startServer(t, &Server{})
			c, err := ParseCommand(append(strings.Fields(tc.args), "-c", "127.0.0.1", "-p", strconv.Itoa(port)))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			cfg := c.ClientConfig(Kernel)
			cfg.Output = &out
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			began := time.Now()
			rep, err := RunClient(ctx, cfg)
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if took := time.Since(began); took > cfg.Duration+time.Duration(c.Omit)*time.Second+3*time.Second {
				t.Errorf("the test took %v", took)
			}
			if !strings.HasSuffix(out.String(), "\niperf Done.\n") {
				t.Errorf("text output:\n%s", out.String())
			}
			ids := map[int]bool{}
			for _, s := range rep.Start.Connected {
				ids[s.Socket] = true
			}
			streams := c.Parallel
			if c.Bidir {
				streams *= 2
			}
			if len(rep.End.Streams) != streams || !ids[1] || (streams > 1 && !ids[3]) {
				t.Fatalf("%d streams, ids %v", len(rep.End.Streams), ids)
			}
			for _, sum := range []*Sum{rep.End.SumSent, rep.End.SumReceived, rep.End.SumSentBidirReverse, rep.End.SumReceivedBidirReverse} {
				if sum == nil {
					continue
				}
				if sum.Bytes == 0 || sum.BitsPerSecond <= 0 {
					t.Errorf("a sum moved nothing: %+v", *sum)
				}
			}
			if c.Omit > 0 && !rep.Intervals[0].Sum.Omitted {
				t.Errorf("the first interval is not omitted: %+v", rep.Intervals[0].Sum)
			}
			if c.GetServerOutput && (rep.ServerOutputText == nil || !strings.Contains(out.String(), "Server output:\nAccepted connection")) {
				t.Errorf("no server output:\n%s", out.String())
			}
			srv := <-reports
			if srv.Error != "" {
				t.Fatalf("server: %s", srv.Error)
			}
			// Each end counted its own side: what one sent the other received, but for what was
			// in flight when the test ended (a server sends until TEST_END reaches it) and
			// for the ends' omitted seconds, which end a control message apart.
			sent, received := rep.End.SumSent.Bytes, srv.Received().Bytes
			if c.Reverse {
				sent, received = srv.Measured().Bytes, rep.Received().Bytes
			}
			slack := 1.05
			if c.Omit > 0 {
				slack = 1.15 // a busy host can put the ends' omitted seconds 50 ms apart
			}
			if float64(received) > slack*float64(sent) || received < sent/2 {
				t.Errorf("sent %d, received %d", sent, received)
			}
		})
	}
}

func TestBusyServerDeniesSecondClient(t *testing.T) {
	port, _ := startServer(t, &Server{})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := RunClient(ctx, ClientConfig{Server: addr, Duration: time.Second, Rate: 1e8})
		first <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if _, err := RunClient(ctx, ClientConfig{Server: addr, Duration: time.Second}); !errors.Is(err, ErrAccessDenied) {
		t.Fatalf("second client: %v, want %v", err, ErrAccessDenied)
	}
	if err := <-first; err != nil {
		t.Fatalf("first client: %v", err)
	}
}

// TestServerRefusesBadParameters sends what no iperf3 client sends and expects iperf3's error
// code back (SERVER_ERROR), with the server still serving afterwards.
func TestServerRefusesBadParameters(t *testing.T) {
	port, _ := startServer(t, &Server{})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for _, tc := range []struct {
		name string
		msg  []byte
		want Code
	}{
		{"huge length", binary.BigEndian.AppendUint32(nil, 1<<31), CodeRecvParams},
		{"not JSON", frame(`{"tcp":true,`), CodeRecvParams},
		{"streams", frame(`{"tcp":true,"time":1,"parallel":1000}`), CodeNumStreams},
		{"block", frame(`{"tcp":true,"time":1,"parallel":1,"len":104857600}`), CodeBlockSize},
		{"datagram", frame(`{"udp":true,"time":1,"parallel":1,"len":70000}`), CodeUDPBlockSize},
		{"time", frame(`{"tcp":true,"time":1000000,"parallel":1}`), CodeDuration},
		{"omit", frame(`{"tcp":true,"time":1,"omit":-1,"parallel":1}`), CodeOmit},
		{"window", frame(`{"tcp":true,"time":1,"parallel":1,"window":1073741824}`), CodeBufSize},
		{"sctp", frame(`{"sctp":true,"time":1,"parallel":1}`), CodeNoSCTP},
		{"congestion", frame(`{"tcp":true,"time":1,"parallel":1,"congestion":"no-such-algorithm"}`), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := untilServed(t, addr)
			defer c.Close()
			c.Write(tc.msg)
			if tc.want == 0 {
				// An algorithm the server lacks: iperf3's server warns and goes on.
				if st, err := readState(c); err != nil || st != stateCreateStreams {
					t.Fatalf("state %d, %v; want CREATE_STREAMS", st, err)
				}
				return
			}
			st, err := readState(c)
			if err != nil || st != stateServerError {
				t.Fatalf("state %d, %v; want SERVER_ERROR", st, err)
			}
			err = readServerError(c)
			var ie *Error
			if !errors.As(err, &ie) || ie.Code != tc.want {
				t.Fatalf("got %v, want code %d", err, tc.want)
			}
			t.Logf("%s: %v", tc.name, err)
		})
	}
	// Still serving.
	untilServed(t, addr).Close()
}

// untilServed connects to the server until it asks for parameters: a test it just refused may
// take it a moment to end.
func untilServed(t *testing.T, addr string) net.Conn {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		ck, _ := newCookie()
		c.Write(ck[:])
		st, err := readState(c)
		switch {
		case err == nil && st == stateParamExchange:
			return c
		case err == nil && st == stateAccessDenied && time.Now().Before(deadline):
			c.Close()
			time.Sleep(10 * time.Millisecond)
		default:
			t.Fatalf("state %d, %v", st, err)
		}
	}
}

func frame(s string) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...) }

// TestClientNamesServerError checks that a SERVER_ERROR reads as iperf3 prints it.
func TestClientNamesServerError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var ck cookie
		io.ReadFull(c, ck[:])
		writeState(c, stateParamExchange)
		var p params
		readJSON(c, &p)
		writeServerError(c, &Error{Code: CodeStreamListen, Errno: 98})
	}()
	_, err = RunClient(context.Background(), ClientConfig{Server: ln.Addr().String(), Duration: time.Second})
	if want := "unable to start stream listener: address already in use"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// TestRealClientHearsOurRefusal: the real iperf3 prints our server's reason.
func TestRealClientHearsOurRefusal(t *testing.T) {
	testutil.RequireCommand(t, "iperf3")
	port, _ := startServer(t, &Server{})
	out, err := exec.Command("iperf3", "-c", "127.0.0.1", "-p", strconv.Itoa(port), "--sctp", "-t", "1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "iperf3: error - no SCTP support available") {
		t.Fatalf("iperf3: %v\n%s", err, out)
	}
}

// TestReportJSON checks the report against iperf3's: a failed test keeps "end" empty.
func TestReportJSON(t *testing.T) {
	_, err := RunClient(context.Background(), ClientConfig{Server: "127.0.0.1:1", Duration: time.Second, JSON: true, Output: io.Discard})
	var ie *Error
	if !errors.As(err, &ie) || ie.Code != CodeConnect {
		t.Fatalf("got %v", err)
	}
	rep := newReport()
	rep.Error = err.Error()
	b, _ := json.Marshal(rep)
	var m map[string]any
	json.Unmarshal(b, &m)
	if end := m["end"].(map[string]any); len(end) != 0 {
		t.Fatalf("end of a failed test: %v", end)
	}
	if !strings.HasPrefix(rep.Error, "unable to connect to server: ") {
		t.Fatalf("error %q", rep.Error)
	}
}
