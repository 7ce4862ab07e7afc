package netstack

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/iperf"
	"golang.org/x/sys/unix"
)

// linuxPeer puts a TAP device into a fresh network namespace (198.18.7.1/24, Linux's own stack
// there) and wires a Stack (198.18.7.2/24) to the other end of it, frame by frame.
func linuxPeer(t *testing.T) (ns string, st *Stack) {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "ip", "iperf3")
	ns = fmt.Sprintf("nicstack-netstack-%d", os.Getpid())
	tap := fmt.Sprintf("nsttap%d", os.Getpid()%100000)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	ifr, err := unix.NewIfreq(tap)
	if err != nil {
		t.Fatal(err)
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		t.Fatalf("TUNSETIFF: %v", err)
	}
	dev := os.NewFile(uintptr(fd), tap) // non-blocking: reads park in the netpoller, Close ends them
	run("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run("link", "set", tap, "netns", ns)
	run("-n", ns, "addr", "add", "198.18.7.1/24", "dev", tap)
	run("-n", ns, "link", "set", tap, "up")
	run("-n", ns, "link", "set", "lo", "up")

	st, err = New(Config{MAC: net.HardwareAddr{2, 0, 0, 0, 7, 2}, Address: netip.MustParsePrefix("198.18.7.2/24")},
		OutboundFunc(func(frames []Frame) int {
			for i, f := range frames {
				if _, err := dev.Write(f.Data); err != nil {
					return i
				}
			}
			return len(frames)
		}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		batch := make([]Frame, 1)
		for {
			n, err := dev.Read(buf)
			if err != nil {
				return
			}
			batch[0] = Frame{Data: buf[:n]}
			st.DeliverFrames(batch)
		}
	}()
	t.Cleanup(func() { st.Close(); dev.Close(); <-done })
	return ns, st
}

// TestLinuxIperf3AgainstEmbeddedServer: a real iperf3 client on Linux's stack measures against
// our server on the embedded stack, across a TAP, at MTU 1500.
func TestLinuxIperf3AgainstEmbeddedServer(t *testing.T) {
	ns, st := linuxPeer(t)
	ln, err := st.Listen("tcp", ":5201")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go (&iperf.Server{}).Serve(ctx, ln)
	for _, args := range [][]string{{}, {"-R"}} {
		cmd := append([]string{"netns", "exec", ns, "iperf3", "-c", "198.18.7.2", "-t", "1", "-J"}, args...)
		out, err := exec.CommandContext(ctx, "ip", cmd...).Output()
		if err != nil {
			t.Fatalf("iperf3 %v: %v\n%s", args, err, out)
		}
		var r struct {
			Error string
			End   struct {
				SumReceived struct {
					BitsPerSecond float64 `json:"bits_per_second"`
				} `json:"sum_received"`
			} `json:"end"`
		}
		if err := json.Unmarshal(out, &r); err != nil || r.Error != "" || r.End.SumReceived.BitsPerSecond <= 0 {
			t.Fatalf("iperf3 %v: %v %q\n%s", args, err, r.Error, out)
		}
		t.Logf("Linux iperf3 client %v -> embedded server: %.2f Gbit/s", args, r.End.SumReceived.BitsPerSecond/1e9)
	}
}

// TestEmbeddedClientAgainstLinuxIperf3: our client on the embedded stack against a real iperf3
// server on Linux's stack.
func TestEmbeddedClientAgainstLinuxIperf3(t *testing.T) {
	ns, st := linuxPeer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, reverse := range []bool{false, true} {
		// A one-off server per test: between tests iperf3 -s briefly stops listening.
		startNSIperf3(t, ctx, ns)
		rep, err := iperf.RunClient(ctx, iperf.ClientConfig{Network: st, Server: "198.18.7.1:5201", Duration: time.Second, Reverse: reverse, Parallel: 2})
		if err != nil {
			t.Fatalf("reverse %v: %v", reverse, err)
		}
		if rep.End.SumReceived.BitsPerSecond <= 0 {
			t.Fatalf("reverse %v: no throughput", reverse)
		}
		t.Logf("embedded client (reverse %v) -> Linux iperf3 server: %.2f Gbit/s", reverse, rep.End.SumReceived.BitsPerSecond/1e9)
	}
}

func startNSIperf3(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	srv := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "iperf3", "-s", "-1", "--forceflush", "-B", "198.18.7.1")
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Server listening") {
				close(ready)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("iperf3 -s did not start")
	}
}
