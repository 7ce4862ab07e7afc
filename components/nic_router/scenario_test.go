package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/packetstream"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// Scenario tests: the deploy/ scenarios with real nic_router and nic_perf processes.

type scenario struct {
	*scenariotest.Run
	t *testing.T
}

func binDir(t *testing.T) string {
	testutil.Binary(t, "github.com/nicstack/nicstack/components/nic_perf")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/report_rom") // router_sculpt's report
	return filepath.Dir(testutil.Binary(t, "github.com/nicstack/nicstack/components/nic_router"))
}

// run starts deploy/name, edited by the replacements (old, new pairs), until the test ends.
func run(t *testing.T, name string, replace ...string) *scenario {
	t.Helper()
	text := scenariotest.Deploy(t, name, replace...)
	// A deploy scenario's state report goes to /tmp for users; a test's to its own folder.
	text = strings.ReplaceAll(text, "/tmp/nicstack-", filepath.Join(t.TempDir(), "nicstack-"))
	return runText(t, name, text)
}

// runText starts a scenario given as text (name gives the syntax), until the test ends.
func runText(t *testing.T, name, text string) *scenario {
	t.Helper()
	return &scenario{t: t, Run: scenariotest.Start(t, name, text, supervisor.Options{
		BinDirs: []string{binDir(t)}, WatchInterval: 50 * time.Millisecond,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		Components: components.Table, // the router's report file is written by the supervisor
	})}
}

// counter reads a component's counter (0 while it is not running).
func (sc *scenario) counter(component, name string) uint64 {
	st, ok := sc.S.Status()
	if !ok {
		sc.t.Fatal("the scenario ended")
	}
	for _, c := range st.Components {
		if c.Name == component {
			return c.Counters[name]
		}
	}
	sc.t.Fatalf("no component %q", component)
	return 0
}

// checkQueues checks where the queue stands while traffic runs: the router reports, per
// interface, the stream it sends on with its acknowledgements and the frames it holds for
// ARP; no hop holds more than a queue, and only what waits has an age.
func (sc *scenario) checkQueues() {
	sc.t.Helper()
	st, ok := sc.S.Status()
	if !ok {
		sc.t.Fatal("the scenario ended")
	}
	for _, c := range st.Components {
		hops := map[string]bool{}
		for _, q := range c.Queues {
			hops[q.Hop] = true
			if q.Frames > uint64(packetstream.MaxQueueSize) || q.Sojourn < 0 || (q.Frames == 0 && (q.Bytes != 0 || q.Sojourn != 0)) {
				sc.t.Errorf("%s: queue %+v", c.Name, q)
			}
		}
		if c.Name != "nic_router" {
			continue
		}
		for _, s := range c.Sessions {
			if s.Role != "server" || s.Service == "Report" {
				continue
			}
			for _, what := range []string{"rx", "rx acks", "arp"} {
				if hop := component.Hop(s.Label, what); !hops[hop] {
					sc.t.Errorf("nic_router reports no queue %q: %+v", hop, c.Queues)
				}
			}
		}
	}
}

// waitCounter waits until a counter reaches at least min; start-up is slow on a loaded machine.
func (sc *scenario) waitCounter(component, name string, min uint64) uint64 {
	sc.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v := sc.counter(component, name)
		if v >= min {
			return v
		}
		if time.Now().After(deadline) {
			sc.t.Fatalf("%s's %s is %d, waited for %d", component, name, v, min)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestUDPBetweenDomains(t *testing.T) {
	report := filepath.Join(t.TempDir(), "router.state")
	sc := run(t, "router_udp.xml", "/tmp/nicstack-router_udp.state", report)
	sc.waitCounter("rx", "rx_frames", 2000)
	sc.waitCounter("rx", "answers", 1) // the router asked for 10.0.2.2
	sc.checkQueues()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(report)
		if strings.Contains(string(b), "domain b") && strings.Contains(string(b), "rx_bytes") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state report at %s: %q", report, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const udpRule = `<udp dst="10.0.2.0/24"> <permit-any domain="b"/> </udp>`

// A config change that keeps the route loses no frame; one that removes it stops the flow
// (the link state is dissolved, frames dropped); restoring it resumes the flow.
func TestReconfigureWhileTrafficRuns(t *testing.T) {
	sc := run(t, "router_udp.xml")
	sc.waitCounter("rx", "rx_frames", 1000)
	// Only routing drops count: dropped_full grows whenever the receiving nic_perf is starved
	// of CPU (CI runs test packages in parallel on 2 cores), config changes or not.
	dropped := sc.counter("nic_router", "dropped")
	for k := 0; k < 3; k++ {
		sc.Edit(`<domain name="b" interface="10.0.2.1/24"/>`,
			`<domain name="b" interface="10.0.2.1/24"/> <domain name="c`+string(rune('0'+k))+`" interface="10.0.3.1/24"/>`)
		time.Sleep(300 * time.Millisecond)
	}
	base := sc.counter("rx", "rx_frames")
	sc.waitCounter("rx", "rx_frames", base+1000)
	if now := sc.counter("nic_router", "dropped"); now != dropped {
		t.Errorf("reconfigurations that keep the route dropped %d frames (and %d at full queues)", now-dropped, sc.counter("nic_router", "dropped_full"))
	}

	sc.Edit(udpRule, "")
	sc.waitCounter("nic_router", "dropped", dropped+1000)
	stalled := sc.counter("rx", "rx_frames")
	time.Sleep(200 * time.Millisecond)
	if n := sc.counter("rx", "rx_frames"); n > stalled+50 { // frames in flight at most
		t.Errorf("%d frames arrived after the route was removed", n-stalled)
	}
	sc.Edit(`<domain name="a" interface="10.0.1.1/24">`, `<domain name="a" interface="10.0.1.1/24">`+udpRule)
	sc.waitCounter("rx", "rx_frames", stalled+1000)
}

// NAT with udp-ports="3": of the 4 flows, one is refused and counted; pings pass the NAT.
func TestNATQuotaAndPing(t *testing.T) {
	sc := run(t, "router_nat.xml")
	sc.waitCounter("nic_router", "nat_refused", 1)
	sc.waitCounter("host", "rx_frames", 300)
	sc.waitCounter("ping", "rx_frames", 5) // echo replies
	// Every frame of the refused flow is dropped: about a quarter of what tx sends.
	tx, rx := sc.counter("tx", "tx_frames"), sc.counter("host", "rx_frames")
	if rx > tx*4/5 {
		t.Errorf("host received %d of %d frames: the 4th flow was not refused", rx, tx)
	}
}

// The Sculpt-shaped config: `nicstack check --component nic_router` accepts it in both
// syntaxes, and a scenario embedding it routes a ping and UDP through its NAT.
func TestSculptConfig(t *testing.T) {
	nicstack := filepath.Join(testutil.BinDir(t), "nicstack")
	for _, f := range []string{"nic_router.xml", "nic_router.hid"} {
		out, err := exec.Command(nicstack, "check", "--component", "nic_router", filepath.Join("..", "..", "runtime", "config", "testdata", f)).CombinedOutput()
		if err != nil {
			t.Errorf("check %s: %v\n%s", f, err, out)
		}
	}
	sc := run(t, "router_sculpt.xml")
	sc.waitCounter("vm", "rx_frames", 5)        // echo replies through NAT
	sc.waitCounter("nic_drv", "rx_frames", 300) // UDP to port 53 through NAT
	sc.waitCounter("nic_drv", "answers", 5)     // ARP and echo
}

// A client that takes frames and never acknowledges them fills its queue: what the router
// sends it is dropped and counted, and the other interfaces keep their traffic.
func TestClientThatNeverAcknowledges(t *testing.T) {
	sc := run(t, "router_udp.xml",
		`<policy label_prefix="rx ->" domain="b"/>`, `<policy label_prefix="rx ->" domain="b"/> <policy label="deaf -> " domain="b"/> <policy label="tx2 -> " domain="a"/>`,
		`<start name="tx">`, `<start name="deaf"> <binary name="nic_perf"/> <config ip="10.0.2.3" ack="no" period_ms="0"/> </start>
	<start name="tx2"> <binary name="nic_perf"/>
		<config tx="yes" ip="10.0.1.3" mac="02:00:00:00:00:03" dst_ip="10.0.2.3" size="256" rate="20000" period_ms="0"/>
	</start>
	<start name="tx">`)
	sc.waitCounter("deaf", "rx_frames", 100)
	sc.waitCounter("nic_router", "dropped_full", 1000)
	base := sc.counter("rx", "rx_frames")
	sc.waitCounter("rx", "rx_frames", base+2000)
}

// <nic-client>: the router opens a Nic session to a server (here the receiving nic_perf) and
// routes into the domain the node names.
func TestNicClient(t *testing.T) {
	sc := run(t, "router_udp.xml",
		`<policy label_prefix="rx ->" domain="b"/>`, `<nic-client label="to-rx" domain="b"/>`,
		`<provides> <service name="Nic"/> <service name="Uplink"/> </provides>`,
		`<provides> <service name="Nic"/> <service name="Uplink"/> </provides>
		<route> <service name="Nic"> <child name="rx"/> </service> <any-service> <parent/> </any-service> </route>`,
		`<config ip="10.0.2.2" period_ms="1000"/>`,
		`<provides> <service name="Nic"/> </provides> <config service="Nic" ip="10.0.2.2" period_ms="1000"/>`,
		`<config tx="yes"`, `<route> <service name="Nic"> <child name="nic_router"/> </service> <any-service> <parent/> </any-service> </route>
		<config tx="yes"`)
	sc.waitCounter("rx", "rx_frames", 1000)
}

// A client that submits wild descriptors (outside its bulk buffer, overflowing, empty) gets
// them counted and acknowledged, and the router's other interfaces keep their traffic. The
// liar is an idle nic_perf whose submit queue the test writes through /proc (root).
func TestClientWithInvalidDescriptors(t *testing.T) {
	testutil.RequireRoot(t)
	sc := run(t, "router_udp.xml",
		`<policy label_prefix="rx ->" domain="b"/>`, `<policy label_prefix="rx ->" domain="b"/> <policy label="liar -> " domain="a"/>`,
		`<start name="tx">`, `<start name="liar"> <binary name="nic_perf"/> <config ip="10.0.1.9" period_ms="0"/> </start>
	<start name="tx">`)
	sc.waitCounter("rx", "rx_frames", 500)
	q := sc.mapSubmitQueue("liar", "-tx (deleted)")
	defer unix.Munmap(q)
	const queueSize, hdr, desc = 1024, 512, 16
	head := (*atomic.Uint32)(unsafe.Pointer(&q[0]))
	tail := (*atomic.Uint32)(unsafe.Pointer(&q[128]))
	wild := [][2]uint32{{0, 64}, {1 << 31, 64}, {0xffffffc0, 0x100}, {4096, 0}, {0xffffffff, 0xffffffff}}
	base := sc.counter("rx", "rx_frames")
	written := 0
	deadline := time.Now().Add(10 * time.Second)
	for written < 5000 || sc.counter("rx", "rx_frames") < base+2000 {
		if time.Now().After(deadline) {
			t.Fatalf("wrote %d wild descriptors; rx got %d frames meanwhile", written, sc.counter("rx", "rx_frames")-base)
		}
		h := head.Load()
		for h-tail.Load() < queueSize && written < 5000 {
			e := q[hdr+int(h%queueSize)*desc:]
			w := wild[written%len(wild)]
			binary.LittleEndian.PutUint32(e[0:], w[0])
			binary.LittleEndian.PutUint32(e[4:], w[1])
			h++
			written++
		}
		head.Store(h)
		time.Sleep(5 * time.Millisecond)
	}
	invalid := uint64(0)
	st, _ := sc.S.Status()
	for _, c := range st.Components {
		if c.Name == "nic_router" {
			for _, s := range c.Sessions {
				invalid += s.Received.Drops
			}
		}
	}
	if invalid == 0 {
		t.Error("the router counted no invalid descriptor")
	}
}

// mapSubmitQueue maps the stream of a component's session whose memfd name ends in suffix,
// through /proc/PID/map_files.
func (sc *scenario) mapSubmitQueue(component, suffix string) []byte {
	sc.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b := sc.tryMap(component, suffix); b != nil {
			return b
		}
		if time.Now().After(deadline) {
			sc.t.Fatalf("%s maps no stream ending in %q", component, suffix)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tryMap is one attempt of mapSubmitQueue: nil while the component or its session is not up.
func (sc *scenario) tryMap(component, suffix string) []byte {
	var pid int
	st, _ := sc.S.Status()
	for _, c := range st.Components {
		if c.Name == component {
			pid = c.Pid
		}
	}
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if pid == 0 || err != nil {
		return nil
	}
	for _, line := range strings.Split(string(maps), "\n") {
		if !strings.Contains(line, "nicstack-stream") || !strings.HasSuffix(line, suffix) {
			continue
		}
		rng := strings.Fields(line)[0]
		var start, end uint64
		fmt.Sscanf(strings.Replace(rng, "-", " ", 1), "%x %x", &start, &end)
		f, err := os.OpenFile(fmt.Sprintf("/proc/%d/map_files/%s", pid, rng), os.O_RDWR, 0)
		if err != nil {
			sc.t.Fatal(err)
		}
		defer f.Close()
		b, err := unix.Mmap(int(f.Fd()), 0, int(end-start), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			sc.t.Fatal(err)
		}
		return b
	}
	return nil
}
