package netstack

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/netdev"
)

// linuxPeer puts a TAP device into a fresh network namespace (198.18.7.1/24 and
// 2001:db8:7::1/64, Linux's own stack there) and wires a Stack (198.18.7.2/24,
// 2001:db8:7::2/64) to the other end of it, frame by frame.
//
// With offload, the TAP carries a virtio-net header per frame (IFF_VNET_HDR) and has TSO and
// checksum offload on, so super-frames cross in both directions: this checks that Frame.Offload
// means exactly what a virtio-net header means to Linux.
func linuxPeer(t *testing.T, offload bool) (ns string, st *Stack) {
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
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if offload {
		flags |= unix.IFF_VNET_HDR
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		t.Fatalf("TUNSETIFF: %v", err)
	}
	if offload {
		if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, unix.TUN_F_CSUM|unix.TUN_F_TSO4|unix.TUN_F_TSO6); err != nil {
			unix.Close(fd)
			t.Fatalf("TUNSETOFFLOAD: %v", err)
		}
	}
	dev := os.NewFile(uintptr(fd), tap) // non-blocking: reads park in the netpoller, Close ends them
	run("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run("link", "set", tap, "netns", ns)
	run("-n", ns, "addr", "add", "198.18.7.1/24", "dev", tap)
	// A new namespace may start with IPv6 off; nodad: usable at once.
	run("netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf."+tap+".disable_ipv6=0")
	run("-n", ns, "-6", "addr", "add", linuxAddr6+"/64", "dev", tap, "nodad")
	run("-n", ns, "link", "set", tap, "up")
	run("-n", ns, "link", "set", "lo", "up")

	var hdr [vnetHdrLen]byte
	st, err = New(Config{MAC: net.HardwareAddr{2, 0, 0, 0, 7, 2}, Offload: offload, Address: netip.MustParsePrefix("198.18.7.2/24"),
		Address6: netip.MustParsePrefix(stackAddr6 + "/64")},
		OutboundFunc(func(frames []Frame) int {
			for i, f := range frames {
				var err error
				if offload {
					putVnetHdr(hdr[:], f.Offload)
					_, err = unix.Writev(fd, [][]byte{hdr[:], f.Data})
				} else {
					_, err = dev.Write(f.Data)
				}
				if err != nil {
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
			if offload {
				if n < vnetHdrLen {
					continue
				}
				batch[0] = Frame{Data: buf[vnetHdrLen:n], Offload: getVnetHdr(buf)}
			}
			st.DeliverFrames(batch)
		}
	}()
	t.Cleanup(func() { st.Close(); dev.Close(); <-done })
	return ns, st
}

// The IPv6 addresses of linuxPeer's two ends.
const linuxAddr6, stackAddr6 = "2001:db8:7::1", "2001:db8:7::2"

// TestIPv6WithLinux: across the TAP, Linux's ping -6 reaches the stack, the real iperf3 -6
// measures against our server and our client -6 against iperf3 -s, both directions, with
// and without virtio-net offloads (TSO super-frames of IPv6, GSOTCPv6), no frame from Linux
// failing the checksum check.
func TestIPv6WithLinux(t *testing.T) {
	for _, offload := range []bool{false, true} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) {
			testutil.RequireCommand(t, "ping")
			ns, st := linuxPeer(t, offload)
			waitAddresses(t, st, netip.MustParsePrefix(stackAddr6+"/64"))
			if out, err := exec.Command("ip", "netns", "exec", ns, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "5", stackAddr6).CombinedOutput(); err != nil {
				t.Fatalf("ping -6 %s: %v\n%s", stackAddr6, err, out)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ln, err := st.Listen("tcp6", ":5201")
			if err != nil {
				t.Fatal(err)
			}
			go (&iperf.Server{Network: st}).Serve(ctx, ln)
			for _, args := range [][]string{{}, {"-R"}} {
				argv := append([]string{"netns", "exec", ns, "iperf3", "-6", "-c", stackAddr6, "-t", "1", "-J"}, args...)
				out, err := exec.CommandContext(ctx, "ip", argv...).Output()
				var r struct {
					Error string
					End   struct {
						SumReceived struct {
							BitsPerSecond float64 `json:"bits_per_second"`
						} `json:"sum_received"`
					} `json:"end"`
				}
				if err != nil || json.Unmarshal(out, &r) != nil || r.Error != "" || r.End.SumReceived.BitsPerSecond <= 0 {
					t.Fatalf("iperf3 -6 %v: %v %q\n%s", args, err, r.Error, out)
				}
				t.Logf("Linux iperf3 -6 client %v -> embedded server: %.2f Gbit/s", args, r.End.SumReceived.BitsPerSecond/1e9)
			}
			for _, reverse := range []bool{false, true} {
				startNSIperf3(t, ctx, ns, linuxAddr6)
				cmd, err := iperf.ParseCommand(strings.Fields("-6 -c " + linuxAddr6 + " -t 1 -P 2"))
				if err != nil {
					t.Fatal(err)
				}
				cfg := cmd.ClientConfig(st)
				cfg.Reverse = reverse
				rep, err := iperf.RunClient(ctx, cfg)
				if err != nil || rep.Received().BitsPerSecond <= 0 {
					t.Fatalf("reverse %v: %v", reverse, err)
				}
				t.Logf("embedded client -6 (reverse %v) -> Linux iperf3 server: %.2f Gbit/s", reverse, rep.Received().BitsPerSecond/1e9)
			}
			if n := st.Stats().RxBadChecksum.Load(); n != 0 {
				t.Fatalf("%d frames from Linux failed the checksum check", n)
			}
		})
	}
}

// vnetHdrLen is the size of struct virtio_net_hdr (without num_buffers).
const vnetHdrLen = 10

// putVnetHdr and getVnetHdr convert between Offload and a virtio-net header (little-endian on
// the x86 and arm64 hosts we run on).
func putVnetHdr(b []byte, o netdev.Offload) {
	b[0], b[1] = o.Flags, o.GSOType
	binary.LittleEndian.PutUint16(b[2:], o.HdrLen)
	binary.LittleEndian.PutUint16(b[4:], o.GSOSize)
	binary.LittleEndian.PutUint16(b[6:], o.CsumStart)
	binary.LittleEndian.PutUint16(b[8:], o.CsumOffset)
}

func getVnetHdr(b []byte) netdev.Offload {
	return netdev.Offload{Flags: b[0], GSOType: b[1], HdrLen: binary.LittleEndian.Uint16(b[2:]),
		GSOSize: binary.LittleEndian.Uint16(b[4:]), CsumStart: binary.LittleEndian.Uint16(b[6:]), CsumOffset: binary.LittleEndian.Uint16(b[8:])}
}

// TestLinuxIperf3AgainstEmbeddedServer: a real iperf3 client on Linux's stack measures against
// our server on the embedded stack, across a TAP, at MTU 1500.
func TestLinuxIperf3AgainstEmbeddedServer(t *testing.T) {
	for _, offload := range []bool{false, true} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) { linuxClientAgainstEmbeddedServer(t, offload) })
	}
}

func linuxClientAgainstEmbeddedServer(t *testing.T, offload bool) {
	ns, st := linuxPeer(t, offload)
	ln, err := st.Listen("tcp", ":5201")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go (&iperf.Server{Network: st}).Serve(ctx, ln)
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
	for _, offload := range []bool{false, true} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) { embeddedClientAgainstLinux(t, offload) })
	}
}

func embeddedClientAgainstLinux(t *testing.T, offload bool) {
	ns, st := linuxPeer(t, offload)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, reverse := range []bool{false, true} {
		// A one-off server per test: between tests iperf3 -s briefly stops listening.
		startNSIperf3(t, ctx, ns, "198.18.7.1")
		rep, err := iperf.RunClient(ctx, iperf.ClientConfig{Network: st, Server: "198.18.7.1:5201", Duration: time.Second, Reverse: reverse, Parallel: 2})
		if err != nil {
			t.Fatalf("reverse %v: %v", reverse, err)
		}
		if rep.Received().BitsPerSecond <= 0 {
			t.Fatalf("reverse %v: no throughput", reverse)
		}
		if stats := st.Stats(); stats.RxBadChecksum.Load() != 0 {
			t.Fatalf("%d frames from Linux failed the checksum check", stats.RxBadChecksum.Load())
		}
		n := st.Stats()
		t.Logf("embedded client (reverse %v) -> Linux iperf3 server: %.2f Gbit/s; average frame in %d, out %d bytes", reverse,
			rep.Received().BitsPerSecond/1e9, n.RxBytes.Load()/max(n.RxFrames.Load(), 1), n.TxBytes.Load()/max(n.TxFrames.Load(), 1))
	}
}

func startNSIperf3(t *testing.T, ctx context.Context, ns, bind string) {
	t.Helper()
	srv := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "iperf3", "-s", "-1", "--forceflush", "-B", bind)
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
