package hostnic

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/netns"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// twoWires is a run of real processes: linux_nic (TAP, Linux side 198.18.10.1 in namespace
// wa) and packet_nic (veth, Linux side 198.18.11.1 in namespace wb), both Uplinks of one
// nic_router that routes between the two wires.
const twoWires = `config
+ parent-provides
  + service LOG
  + service Tap
  + service Packet
+ default-route
  + any-service
    + parent
    + any-child
+ default | caps: 100 | ram: 32M
+ start nic_router | ram: 32M
  + provides
    + service Uplink
  + config
    + policy | label_prefix: tap -> | domain: a
    + policy | label_prefix: packet -> | domain: b
    + domain a | interface: 198.18.10.2/24
      + tcp | dst: 198.18.11.0/24
        + permit-any | domain: b
      + icmp | dst: 198.18.11.0/24 | domain: b
    + domain b | interface: 198.18.11.2/24
+ start tap
  + binary linux_nic
  + config | netns: wa | address: 198.18.10.1/24 | gateway: 198.18.10.2 | tap_mtu: 1500 | offload: yes
+ start packet
  + binary packet_nic
  + config | netns: wb | address: 198.18.11.1/24 | gateway: 198.18.11.2 | mtu: 1500 | rx_irq_throttle: 651
-
`

// runScenario runs text under a supervisor until t ends.
func runScenario(t *testing.T, text string) (*supervisor.Supervisor, *testutil.SyncBuffer) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "ip")
	var dir string
	for _, c := range []string{"nic_router", "linux_nic", "packet_nic"} {
		dir = filepath.Dir(testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c))
	}
	r := scenariotest.Start(t, "scenario.hid", text, supervisor.Options{
		BinDirs: []string{dir}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
	})
	return r.S, r.Logs
}

// counters returns the named component's counters (nil while it is not running).
func counters(t *testing.T, s *supervisor.Supervisor, name string) map[string]uint64 {
	st, ok := s.Status()
	if !ok {
		t.Fatal("the run ended")
	}
	for _, c := range st.Components {
		if c.Name == name {
			return c.Counters
		}
	}
	return nil
}

// runNS returns the run's namespace called name, waiting for a session to make it.
func runNS(t *testing.T, s *supervisor.Supervisor, name string) *os.File {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if p, ok := s.Netns(name); ok {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("no namespace %s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TCP from the TAP's namespace to the veth's, through linux_nic, nic_router and packet_nic:
// frames and (with TSO on both Linux sides) super-frames both ways, across processes.
func TestProcessesTwoWires(t *testing.T) {
	s, logs := runScenario(t, twoWires)
	wa, wb := runNS(t, s, "wa"), runNS(t, s, "wb")

	conn, peer := connect(t, wa, wb)
	defer conn.Close()
	defer peer.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	peer.SetDeadline(time.Now().Add(20 * time.Second))

	// 4 MB each way at once, checked byte for byte.
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i * 31 / 7)
	}
	errs := make(chan error, 2)
	go func() { _, err := conn.Write(data); errs <- err }()
	go func() { _, err := peer.Write(data); errs <- err }()
	for _, c := range []*net.TCPConn{peer, conn} {
		got := make([]byte, len(data))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("received %d bytes intact %v: %v", len(got), bytes.Equal(got, data), err)
		}
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	for _, name := range []string{"tap", "packet"} {
		c := counters(t, s, name)
		t.Logf("%s: %v", name, c)
		// A burst to the router (rx) or a batch to the wire (tx) takes one wakeup.
		for dir, wakeups := range map[string]string{"rx": "rx_bursts", "tx": "tx_batches"} {
			frames, bytes := c[dir+"_frames"], c[dir+"_bytes"]
			if frames == 0 || c[wakeups] == 0 || c[wakeups] > frames {
				t.Errorf("%s %s: %d frames in %d %s", name, dir, frames, c[wakeups], wakeups)
			}
			// Super-frames: the average frame is larger than the MTU allows.
			if frames > 0 && bytes/frames <= 1514 {
				t.Errorf("%s %s: %d frames of %d bytes on average: no super-frames", name, dir, frames, bytes/frames)
			}
		}
	}
	conn.Close()
	peer.Close()

	// The veth's Linux side goes down: packet_nic gives up its Uplink session. Back up, it
	// asks again and a new connection goes through.
	out, err := exec.Command("nsenter", "--net="+wb.Name(), "ip", "-o", "link", "show", "type", "veth").Output()
	veth, _, _ := strings.Cut(strings.TrimSpace(string(out)), "@")
	if _, veth, _ = strings.Cut(veth, ": "); err != nil || veth == "" {
		t.Fatalf("no veth in wb: %q %v", out, err)
	}
	for _, state := range []string{"down", "up"} {
		if out, err := exec.Command("nsenter", "--net="+wb.Name(), "ip", "link", "set", veth, state).CombinedOutput(); err != nil {
			t.Fatalf("ip link set %s %s: %v %s", veth, state, err, out)
		}
		waitLog(t, logs, `[packet] level=INFO msg="link `+state+`"`)
	}
	waitLog(t, logs, `[packet] level=INFO msg="uplink up"`, `[packet] level=INFO msg="uplink up"`)
	// Linux dropped the default route with the link.
	if out, err := exec.Command("nsenter", "--net="+wb.Name(), "ip", "route", "replace", "default", "via", "198.18.11.2").CombinedOutput(); err != nil {
		t.Fatalf("route: %v %s", err, out)
	}
	conn, peer = connect(t, wa, wb)
	conn.Close()
	peer.Close()
}

// waitLog waits until the run's output holds the lines (substrings, in order, repeats
// counted).
func waitLog(t *testing.T, logs *testutil.SyncBuffer, lines ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rest, ok := logs.String(), true
		for _, l := range lines {
			var found bool
			if _, rest, found = strings.Cut(rest, l); !found {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output", lines)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// connect makes a TCP connection from namespace wa to 198.18.11.1 in wb: it listens once the
// supervisor has configured the address, and dials until both uplinks are up and the router
// has resolved both sides.
func connect(t *testing.T, wa, wb *os.File) (conn, peer *net.TCPConn) {
	t.Helper()
	var ln *net.TCPListener
	deadline := time.Now().Add(30 * time.Second)
	for ln == nil || conn == nil {
		var err error
		if ln == nil {
			err = netns.Do(wb, func() (err error) {
				ln, err = net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(198, 18, 11, 1), Port: 7500})
				return err
			})
		} else {
			err = netns.Do(wa, func() error {
				c, err := net.DialTimeout("tcp4", "198.18.11.1:7500", time.Second)
				if err == nil {
					conn = c.(*net.TCPConn)
				}
				return err
			})
		}
		if err != nil && time.Now().After(deadline) {
			t.Fatalf("no connection through the router: %v", err)
		} else if err != nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	defer ln.Close()
	peer, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	return conn, peer
}
