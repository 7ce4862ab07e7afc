// Package vhost measures the vm's vhost-user back end with front ends nobody here wrote, at
// full speed: DPDK's testpmd sends UDP from a virtio-user port (txonly) into one vm, nic_router
// routes it to a second vm, and a second testpmd counts it at its virtio-user port (icmpecho,
// which also answers the router's ARP). The reference is DPDK's own vhost switch, testpmd
// with two net_vhost ports in io forwarding, between the same two front ends in the same run
// and on the same CPUs. It is the harness of `nicstack bench vhost`.
package vhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/drivers/vhostuser"
	"github.com/nicstack/nicstack/internal/testpmd"
)

// Options are one invocation's settings.
type Options struct {
	Sizes     []int         // frame sizes in bytes without FCS (testpmd's --txpkts)
	Queues    []int         // queue pairs of every port
	Time      time.Duration // measuring time per point, setup and run
	Runs      int           // runs per point; the medians are reported
	Middle    int           // the CPU of the middle: our router and vms, or DPDK's switch
	Ends      int           // the CPU of the two front ends
	JSON      string        // also write the points to this file
	Plot      string        // draw rates and CPU per Mpps into this PNG
	Boost     bool          // every measured process's scheduling group at nice -20
	QueueSize int           // entries per virtqueue of the front ends (0: 256)
	// Baseline, when set, is a folder of other component binaries (an older build) run as a
	// third setup in every run beside ours, so that a change is measured against what it
	// changed on the same machine at the same time.
	Baseline string
	bench.Components
}

// BusyPoll is what the output says of testpmd's CPU.
const BusyPoll = "testpmd busy-polls: each testpmd's forwarding core takes its CPU whole by design (DPDK's switch ~100%, the front ends share theirs), so compare CPU per delivered Mpps. The front ends share a CPU: the sink loses what arrives while the generator runs, so sent Mpps/CPU (what the middle took from the generator per CPU it used) is the middle's capacity."

// MaxQueues is the most queue pairs the vm's vhost-user back end serves (its queues="N").
const MaxQueues = vhostuser.MaxQueuePairs

// frontMem and switchMem are each testpmd's hugepage memory in MiB: its mbuf pool (16384
// mbufs of 2176 bytes) and the EAL's own.
const (
	frontMem  = 128
	switchMem = 128
)

// Run measures every size and queue count Runs times, each run both setups one after the
// other, printing each window, then the table of medians; the hugepages it reserves are given
// back however it ends (ctx cancelled by Ctrl-C included).
func Run(ctx context.Context, out io.Writer, o Options) (err error) {
	if o.Runs < 1 {
		return fmt.Errorf("--runs %d: want at least 1", o.Runs)
	}
	for _, q := range o.Queues {
		if q < 1 {
			return fmt.Errorf("--queues %d: want at least 1", q)
		}
		if q > MaxQueues {
			return fmt.Errorf("--queues %d: the vm's vhost-user back end serves at most %d queue pairs", q, MaxQueues)
		}
	}
	if err := testpmd.Installed(); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("bench vhost needs root: it reserves hugepages and mounts a hugetlbfs")
	}
	h, err := testpmd.ReserveHugepages((2*frontMem + switchMem + 64) / 2)
	if err != nil {
		return err
	}
	defer func() {
		if e := h.Release(); err == nil {
			err = e
		}
	}()
	dir, err := os.MkdirTemp("", "nicstack-bench-vhost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o711); err != nil { // the vms' users reach their sockets
		return err
	}
	env := env{o: o, huge: h.Dir, dir: dir}

	bench.PrintLoad(out)
	fmt.Fprintf(out, "%s\nmiddle (nic_router and both vms, or DPDK's switch) on CPU %d, the two testpmd front ends on CPU %d, boost %v\n", BusyPoll, o.Middle, o.Ends, o.Boost)
	var points []Point
	for _, size := range o.Sizes {
		for _, queues := range o.Queues {
			var ours, base, dpdk []Sample
			notRun := ""
			setups := []string{Ours, DPDK}
			if o.Baseline != "" {
				setups = []string{Baseline, Ours, DPDK}
			}
		runs:
			for run := 1; run <= o.Runs; run++ {
				for _, setup := range setups {
					w, err := env.measure(ctx, setup, size, queues)
					if ctx.Err() != nil {
						return ctx.Err()
					}
					if err != nil { // the point is not run; the others are
						notRun = fmt.Sprintf("%s, run %d: %v", setup, run, err)
						fmt.Fprintf(out, "%5d B  q%d  run %d  %-8s  not run: %v\n", size, queues, run, setup, err)
						break runs
					}
					s := w.sample()
					printRun(out, size, queues, run, setup, s)
					switch setup {
					case Ours:
						ours = append(ours, s)
					case Baseline:
						base = append(base, s)
					default:
						dpdk = append(dpdk, s)
					}
				}
			}
			p := median(size, queues, mergeable(size), ours, dpdk)
			if o.Baseline != "" {
				p.baseline(ours, base)
			}
			p.NotRun = notRun
			points = append(points, p)
		}
	}
	printTable(out, points, o.Runs, BusyPoll)
	bench.PrintLoad(out)
	if o.JSON != "" {
		if err := bench.WriteJSON(o.JSON, points); err != nil {
			return err
		}
	}
	if o.Plot != "" {
		return drawPlot(o.Plot, points)
	}
	return nil
}

// mergeable: frames larger than one receive buffer need mergeable RX buffers on both front
// ends (and testpmd's --max-pkt-len).
func mergeable(size int) bool { return size > 1514 }

// The front ends' own MACs; the generator's addressing is testpmd.Through's.
var (
	genMAC  = net.HardwareAddr{2, 2, 2, 2, 2, 1}
	sinkMAC = net.HardwareAddr{2, 2, 2, 2, 2, 2}
)

// env is what every measurement shares.
type env struct {
	o    Options
	huge string // the hugetlbfs
	dir  string // the sockets
}

// frontEnd is a testpmd front end on the ends' CPU: the generator sends frames of size bytes
// to the router, the sink answers ARP and counts.
func (e env) frontEnd(name, sock string, size, queues int) testpmd.Config {
	c := testpmd.Config{Name: name, CPUs: []int{e.o.Ends}, HugeDir: e.huge, MemMB: frontMem, Queues: queues,
		VirtioUser: []testpmd.VirtioUser{{Path: sock, Queues: queues, Mergeable: mergeable(size), QueueSize: e.o.QueueSize}}}
	if mergeable(size) {
		c.MaxPktLen, c.Scatter = size+4, true // with the FCS; into a chain of mbufs
	}
	if name == "gen" {
		c.Forward, c.TxPkts, c.EthPeer, c.TxIP, c.MultiFlow = testpmd.TxOnly, testpmd.Segments(size, 2048), testpmd.RouterMAC, [2]netip.Addr{testpmd.GenIP, testpmd.SinkIP}, queues > 1
		c.VirtioUser[0].MAC = genMAC
	} else {
		c.Forward = testpmd.ICMPEcho
		c.VirtioUser[0].MAC = sinkMAC
	}
	return c
}

// Warmup is the time between the first frame at the sink and the window: ARP resolved,
// queues filled.
const Warmup = 500 * time.Millisecond

// measure runs one setup: the middle, then the sink and the generator, and counts a window.
func (e env) measure(ctx context.Context, setup string, size, queues int) (window, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gs, ss := filepath.Join(e.dir, setup+"-tx.sock"), filepath.Join(e.dir, setup+"-rx.sock")
	pids := map[string]int{}
	var middle []string
	var pmds []*testpmd.Testpmd
	losses := func() map[string]uint64 { return nil } // where the middle loses frames
	stopMiddle := func() {}
	defer func() { // the front ends end first, so that the back ends see them go
		for i := len(pmds) - 1; i >= 0; i-- {
			pmds[i].Quit()
		}
		stopMiddle()
	}()
	start := func(c testpmd.Config) (*testpmd.Testpmd, error) {
		var log io.Writer
		if e.o.Verbose {
			log = os.Stderr
		}
		p, err := testpmd.Start(ctx, c, log)
		if err != nil {
			return nil, err
		}
		pmds = append(pmds, p)
		pids[c.Name] = p.Pid
		e.boost(p.Pid)
		return p, nil
	}
	switch setup {
	case Ours, Baseline:
		c := e.o.Components
		if setup == Baseline {
			c.Bins = append([]string{e.o.Baseline}, c.Bins...)
		}
		sc, err := c.StartScenario(ctx, "vhost", []byte(testpmd.Through{GenSock: gs, SinkSock: ss, Queues: queues, CPU: e.o.Middle}.XML()))
		if err != nil {
			return window{}, err
		}
		stopMiddle = sc.Stop
		losses = func() map[string]uint64 { return lossCounters(sc) }
		// The supervisor binds the sockets before it starts the vms; the front ends connect
		// once the vms run, to be served.
		if !bench.WaitFor(15*time.Second, func() bool {
			st, alive := sc.S.Status()
			n := 0
			for _, c := range st.Components {
				if c.State == "running" && c.Pid > 0 {
					pids[c.Name] = c.Pid
					n++
				}
			}
			return alive && n == 3
		}) {
			return window{}, errors.New("the scenario's three components did not run within 15 s (run with -v for the logs)")
		}
		middle = []string{"nic_router", "vm_tx", "vm_rx"}
		defer e.boost(pids["nic_router"])() // the three share one session
	case DPDK:
		if _, err := start(testpmd.Config{Name: "switch", CPUs: []int{e.o.Middle}, HugeDir: e.huge, MemMB: switchMem,
			Forward: testpmd.IO, Queues: queues, MaxPktLen: maxPktLen(size), // net_vhost chains mbufs itself, refusing the scatter offload
			Vhost: []testpmd.Vhost{{Iface: gs, Queues: queues}, {Iface: ss, Queues: queues}}}); err != nil {
			return window{}, err
		}
		middle = []string{"switch"}
	}
	sink, err := start(e.frontEnd("sink", ss, size, queues))
	if err != nil {
		return window{}, err
	}
	gen, err := start(e.frontEnd("gen", gs, size, queues))
	if err != nil {
		return window{}, err
	}
	for _, p := range pmds {
		if err := p.StartForwarding(); err != nil {
			return window{}, err
		}
	}
	var got []testpmd.PortStats
	if !bench.WaitFor(15*time.Second, func() bool {
		got, err = sink.Stats()
		return err != nil || got[0].RX.Packets > 0
	}) || err != nil {
		return window{}, fmt.Errorf("no frame reached the sink within 15 s (%v; run with -v for the logs)", err)
	}
	if err := sleep(ctx, Warmup); err != nil {
		return window{}, err
	}
	l0 := losses()
	g0, s0, c0, t0, err := snap(gen, sink, pids)
	if err != nil {
		return window{}, err
	}
	if err := sleep(ctx, e.o.Time); err != nil {
		return window{}, err
	}
	g1, s1, c1, t1, err := snap(gen, sink, pids)
	if err != nil {
		return window{}, err
	}
	w := window{seconds: t1.Sub(t0).Seconds(), sent: g1.Sub(g0), got: s1.Sub(s0), cpu: map[string]float64{}, middle: middle}
	for name, n := range losses() {
		if n > l0[name] {
			if w.lost == nil {
				w.lost = map[string]uint64{}
			}
			w.lost[name] = n - l0[name]
		}
	}
	for name := range c1 {
		w.cpu[name] = float64(c1[name]-c0[name]) / 100 // USER_HZ ticks
	}
	return w, nil
}

// lossCounters are the counters of our middle that count frames lost on the way, by
// "component counter": the vm_tx's session full (rx_dropped), the router's destination full
// (dropped_full), the vm_rx's guest without buffers in time (vhost_tx_dropped).
func lossCounters(sc *bench.Scenario) map[string]uint64 {
	st, _ := sc.S.Status()
	m := map[string]uint64{}
	for _, c := range st.Components {
		for _, name := range []string{"rx_dropped", "vhost_rx_dropped", "dropped_full", "dropped", "vhost_tx_dropped", "tx_dropped"} {
			if n, ok := c.Counters[name]; ok {
				m[c.Name+" "+name] = n
			}
		}
	}
	return m
}

// boost puts pid's scheduling group (its session's autogroup) at nice -20, so that other work
// on the machine does not take an equal share of the measured CPUs, and returns what puts it
// back. Each testpmd has a session of its own; the components share the session of the bench,
// whose group goes back to its nice when the setup ends. Best effort: without autogroups the
// write fails and the process runs as it is.
func (e env) boost(pid int) (restore func()) {
	path := fmt.Sprintf("/proc/%d/autogroup", pid)
	b, err := os.ReadFile(path) // "/autogroup-72 nice 0"
	f := strings.Fields(string(b))
	if !e.o.Boost || err != nil || len(f) != 3 || os.WriteFile(path, []byte("-20"), 0) != nil {
		return func() {}
	}
	return func() { os.WriteFile(path, []byte(f[2]), 0) }
}

func maxPktLen(size int) int {
	if mergeable(size) {
		return size + 4
	}
	return 0
}

// snap reads the generator's and the sink's port counters and every process's CPU ticks.
func snap(gen, sink *testpmd.Testpmd, pids map[string]int) (g, s testpmd.PortStats, cpu map[string]uint64, at time.Time, err error) {
	cpu = map[string]uint64{}
	for name, pid := range pids {
		cpu[name] = bench.TreeTicks(pid)
	}
	at = time.Now()
	gs, err := gen.Stats()
	if err != nil {
		return
	}
	ss, err := sink.Stats()
	if err != nil {
		return
	}
	return gs[0], ss[0], cpu, at, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
