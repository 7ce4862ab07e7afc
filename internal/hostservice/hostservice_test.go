package hostservice_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/hostservice"
	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/netns"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// The exec'd commands sleep for a number no other process uses, so the test can find them.
const parentScenario = `<config>
	<parent-provides> <service name="Tap"/> <service name="Packet"/> </parent-provides>
	<start name="tapper" restart="yes">
		<binary name="test_client"/>
		<route> <service name="Tap"> <parent/> </service> </route>
		<config service="Tap" netns="a" address="198.18.5.1/24"
			exec="ip neigh replace 198.18.5.2 lladdr 02:00:00:00:00:02 dev $NICSTACK_INTERFACE &amp;&amp; echo neighbour set &amp;&amp; exec sleep 7391"/>
	</start>
	<start name="packer">
		<binary name="test_client"/>
		<route> <service name="Packet"> <parent/> </service> </route>
		<config service="Packet" netns="b" address="198.18.6.1/24" mtu="1400"
			exec="ip neigh replace 198.18.6.2 lladdr 02:00:00:00:00:02 dev $NICSTACK_INTERFACE &amp;&amp; echo neighbour set &amp;&amp; exec sleep 7391"/>
	</start>
</config>`

// run is a scenario under a supervisor with the host's parent services.
type run struct {
	*scenariotest.Run
	t *testing.T
}

func startRun(t *testing.T, scenario string) *run {
	t.Helper()
	testutil.Binary(t, "github.com/nicstack/nicstack/components/test_echo")
	bins := filepath.Dir(testutil.Binary(t, "github.com/nicstack/nicstack/components/test_client"))
	return &run{scenariotest.Start(t, "scenario.xml", scenario, supervisor.Options{
		BinDirs: []string{bins}, ParentServices: hostservice.Services(),
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
	}), t}
}

// waitFor polls cond until it holds or the time is up.
func (r *run) waitFor(what string, timeout time.Duration, cond func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s; logs:\n%s", what, r.Logs.String())
		}
	}
}

// hostState lists the host's interfaces, this process's namespaces and the exec'd sleeps.
func hostState(t *testing.T) string {
	links, err := exec.Command("ip", "-o", "link").Output()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(string(links), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			names = append(names, f[1])
		}
	}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), fmt.Sprintf("nst%d-", os.Getpid())) {
			names = append(names, "netns "+e.Name())
		}
	}
	for _, pid := range sleeps() {
		names = append(names, fmt.Sprintf("sleep pid %d", pid))
	}
	return strings.Join(names, " ")
}

func sleeps() []int {
	var pids []int
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		if b, err := os.ReadFile(f); err == nil && bytes.Equal(b, []byte("sleep\x007391\x00")) {
			var pid int
			fmt.Sscanf(f, "/proc/%d/cmdline", &pid)
			if syscall.Kill(pid, 0) == nil && !zombie(pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(b, ')')
	return err != nil || i < 0 || len(b) < i+3 || b[i+2] == 'Z'
}

// udpEcho sends datagrams from inside the run's namespace name to addr until one comes back
// (the test component reflects them through the TAP or packet socket).
func udpEcho(t *testing.T, r *run, name, addr string) {
	path, ok := r.S.Netns(name)
	if !ok {
		t.Fatalf("no namespace %q", name)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var conn *net.UDPConn
	if err := netns.Do(f, func() (err error) {
		conn, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msg := []byte("through " + name)
	buf := make([]byte, 100)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if _, err := conn.Write(msg); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if n, err := conn.Read(buf); err == nil {
			if !bytes.Equal(buf[:n], msg) {
				t.Fatalf("%s: got %q back, sent %q", name, buf[:n], msg)
			}
			return
		}
	}
	t.Fatalf("%s: no datagram came back from %s", name, addr)
}

// TestParentServices: a TAP and a packet socket carry datagrams between the namespace's
// kernel and a component, the exec'd commands run inside the namespaces, a client that
// crashed takes its interface over when it restarts, and nothing is left on the host afterwards.
func TestParentServices(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "ip", "nsenter")
	before := hostState(t)
	t.Cleanup(func() { // runs after the run's own cleanup has stopped it
		if after := hostState(t); after != before {
			t.Errorf("the run left things behind:\nbefore: %s\nafter:  %s", before, after)
		}
	})
	r := startRun(t, parentScenario)
	r.waitFor("both exec'd commands", 20*time.Second, func() bool {
		logs := r.Logs.String()
		return strings.Contains(logs, "[tapper/a] neighbour set") && strings.Contains(logs, "[packer/b] neighbour set")
	})
	udpEcho(t, r, "a", "198.18.5.2:9")
	udpEcho(t, r, "b", "198.18.6.2:9")
	for _, n := range []string{"tapper", "packer"} {
		c := r.Component(n)
		if c.Counters["wire_reflected"] == 0 || c.Counters["denied"] != 0 {
			t.Errorf("%s: counters %v", n, c.Counters)
		}
		if len(c.Requests) != 1 || c.Requests[0].Server != "parent" || c.Requests[0].State != "open" {
			t.Errorf("%s: requests %+v", n, c.Requests)
		}
	}

	// A client that crashed and restarts takes over its session: the same interface with the
	// command in its namespace, as a wire's far end outlives a restart of its driver.
	pid := r.Component("tapper").Pid
	syscall.Kill(pid, syscall.SIGKILL)
	r.waitFor("the tapper's session taken over", 20*time.Second, func() bool {
		c := r.Component("tapper")
		return c.Pid != pid && len(c.Requests) == 1 && c.Requests[0].State == "open" &&
			strings.Contains(r.Logs.String(), "tapper takes over the Tap session of its crashed process")
	})
	udpEcho(t, r, "a", "198.18.5.2:9")
	if n := strings.Count(r.Logs.String(), "[tapper/a] neighbour set"); n != 1 {
		t.Errorf("the command ran %d times, want once", n)
	}
	if n := len(sleeps()); n != 2 {
		t.Errorf("%d exec'd commands run, want 2", n)
	}
	path, _ := r.S.Netns("a")
	out, err := supervisor.ExecIn(context.Background(), path, []string{"ip", "-o", "link"}).Output()
	if err != nil {
		t.Fatal(err)
	}
	if taps := strings.Count(string(out), "tap"); taps != 1 {
		t.Errorf("namespace a has %d TAPs, want 1:\n%s", taps, out)
	}
}

func TestParentServiceRefusals(t *testing.T) {
	testutil.RequireRoot(t)
	r := startRun(t, `<config>
	<parent-provides> <service name="Tap"/> <service name="Timer"/> </parent-provides>
	<start name="badns"> <binary name="test_client"/> <route> <any-service> <parent/> </any-service> </route>
		<config service="Tap" netns="no/slash"/> </start>
	<start name="timer"> <binary name="test_client"/> <route> <any-service> <parent/> </any-service> </route>
		<config service="Timer" device="yes"/> </start>
	<start name="nons"> <binary name="test_client"/> <route> <any-service> <parent/> </any-service> </route>
		<config service="Tap"/> </start>
</config>`)
	want := map[string]string{
		"badns": `Tap session: netns="no/slash": want a name of 1 to 16 letters, digits or _`,
		"timer": `the supervisor serves no Timer sessions itself (it serves: Packet, Platform, Tap)`,
		"nons":  `netns= names the namespace of the run the interface goes into; none given`,
	}
	r.waitFor("all denied", 20*time.Second, func() bool {
		for name := range want {
			if r.Component(name).Counters["denied"] != 1 {
				return false
			}
		}
		return true
	})
	for name, want := range want {
		if reqs := r.Component(name).Requests; len(reqs) != 1 || !strings.Contains(reqs[0].Reason, want) {
			t.Errorf("%s: requests %+v, want a denial saying %q", name, reqs, want)
		}
	}
}

// Platform opens a PCI device's VFIO group, and says why not: here, no such device.
func TestPlatformNamesTheDevice(t *testing.T) {
	_, err := hostservice.Platform(1, nil, 1500, map[string]string{"pci": "0000:ff:1f.7"})
	if err == nil || !strings.Contains(err.Error(), "no PCI device 0000:ff:1f.7") {
		t.Errorf("Platform of an absent device: %v", err)
	}
}

// TestHandedOutFilesStayOutOfTheNetpoller: the TAP and the packet socket the supervisor makes
// are blocking descriptors, which os.NewFile leaves out of its netpoller (no deadlines): a
// non-blocking one woke the supervisor at every frame its client read or wrote, though the
// supervisor only holds it.
func TestHandedOutFilesStayOutOfTheNetpoller(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "ip")
	ns, err := netns.New("poll")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	for name, service := range map[string]supervisor.ParentService{"Tap": hostservice.Tap, "Packet": hostservice.Packet} {
		d, err := service(7, ns, 1500, map[string]string{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, f := range d.Files {
			if err := f.SetReadDeadline(time.Now()); !errors.Is(err, os.ErrNoDeadline) {
				t.Errorf("%s: %s takes deadlines (%v): it is in the supervisor's netpoller", name, f.Name(), err)
			}
			f.Close()
		}
		if d.Close != nil {
			d.Close()
		}
	}
}
