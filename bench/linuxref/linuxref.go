// Package linuxref measures the Linux reference of a scenario that runs nicstack inside a
// QEMU guest (deploy/qemu_e1000e.hid, whose guest runs qemu_e1000e_guest.hid: ipxe_nic on the
// e1000e through VFIO, nic_router with NAT, a vm running iperf to remote_host on the host
// side). The reference is the same run, host side and guest image, with Linux in the three
// components' places inside the guest: Linux's e1000e driver, the kernel forwarding and
// masquerading (nftables), and the vm a network namespace behind a veth pair, addressed as
// the guest scenario addresses them (scripts/guest-linux-router.sh does it in the guest).
package linuxref

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/internal/qemu"
	"github.com/nicstack/nicstack/runtime/config"
)

// Result is one reference run.
type Result struct {
	// Mbps is the test's throughput as its receiver counted it (the vm's iperf report); of a
	// --bidir test the vm's sending, BidirReverseMbps the other way (0 otherwise).
	Mbps, BidirReverseMbps float64
	// GuestCPU is the whole guest's CPU from just before the iperf test until just after it,
	// in percent of one of its vCPUs (200 is both of two busy); Seconds is that time.
	GuestCPU, Seconds float64
	// IRQPerSecond is the e1000e's interrupts (all its vectors, all CPUs) over Seconds.
	IRQPerSecond float64
	// NATPackets is what the masquerade rule rewrote (the first packet of each connection),
	// NATConnections the tracked connections of the vm whose replies went to the uplink's
	// address: the traffic took the kernel's NAT.
	NATPackets, NATConnections uint64
}

// Direction names of the iperf test, as `nicstack bench iperf --direction` has them.
var directions = map[string][]string{"rx": {"-R"}, "tx": nil, "bidir": {"--bidir"}}

// Run runs the scenario at path (deploy/qemu_e1000e.hid or one of its shape) once with the
// reference in its guest: an iperf test of d in direction (rx: remote_host sends to the vm,
// tx: the vm sends, bidir: both at once) from the vm's namespace to the address the guest
// scenario's vm runs its test to. The guest scenario is the one the guest's --run=guest-scenario
// names, read from path's folder. Run builds the guest image first when an input changed
// (qemu.BuildScenarioImage with Linux's e1000e, which a bench boots for its nicstack rows too,
// so both sides boot the same guest) and hands it to the guest program through qemu.ImageEnv
// for the run: not for concurrent use with other runs that set it. When qemu.ImageEnv is set
// already, its image is the one booted (as BuildScenarioImage has it), and must be that one.
// Everything the run made is gone when it returns.
func Run(ctx context.Context, c bench.Components, path, direction string, d time.Duration) (Result, error) {
	text, g, err := reference(path, direction, d)
	if err != nil {
		return Result{}, err
	}
	im, err := qemu.BuildScenarioImage(ctx, true)
	if err != nil {
		return Result{}, err
	}
	if old, had := os.LookupEnv(qemu.ImageEnv); had {
		defer os.Setenv(qemu.ImageEnv, old)
	} else {
		defer os.Unsetenv(qemu.ImageEnv)
	}
	os.Setenv(qemu.ImageEnv, filepath.Dir(im.Kernel))

	logs := &console{}
	if c.Logs != nil {
		c.Logs = io.MultiWriter(logs, c.Logs)
	} else {
		c.Logs = logs
	}
	sc, err := c.StartScenario(ctx, "linuxref", text)
	if err != nil {
		return Result{}, err
	}
	defer sc.Stop()
	// Boot and set-up take seconds under KVM, ten or more under TCG on a busy machine.
	ctx, cancel := context.WithTimeout(ctx, d+3*time.Minute)
	defer cancel()
	for {
		if _, done := qemu.FindMarker(logs.String(), "exit"); done {
			break
		}
		select {
		case err := <-sc.Done:
			sc.Done <- err
			return Result{}, fmt.Errorf("linux reference: the run ended (%v) before the guest did; output:\n%s", err, logs)
		case <-ctx.Done():
			return Result{}, fmt.Errorf("linux reference: %w; output:\n%s", ctx.Err(), logs)
		case <-time.After(200 * time.Millisecond):
		}
	}
	r, err := parse(logs.String(), g.cpus)
	if err != nil {
		return r, fmt.Errorf("linux reference: %w; output:\n%s", err, logs)
	}
	return r, nil
}

// reference is the scenario at path with the reference in its guest, and what Run reads.
func reference(path, direction string, d time.Duration) ([]byte, guest, error) {
	dirArgs, ok := directions[direction]
	if !ok {
		return nil, guest{}, fmt.Errorf("linux reference: direction %q: want rx, tx or bidir", direction)
	}
	root, err := config.ParseFile(path)
	if err != nil {
		return nil, guest{}, err
	}
	g, err := findGuest(root, filepath.Dir(path))
	if err != nil {
		return nil, g, fmt.Errorf("%s: %w", path, err)
	}
	test := append([]string{"-c", g.remote, "-t", strconv.Itoa(max(int(d.Seconds()), 1))}, dirArgs...)
	g.run.Attrs = []config.Attr{{Name: "value", Value: "--run=guest-linux-router " + strings.Join(append(g.addresses, test...), " ")}}
	if g.exit != nil {
		g.exit.Disabled = true // the run stays up for remote_host's counters after the guest ends
	}
	return root.XML(), g, nil
}

// guest is what Run patches and reads in the scenario.
type guest struct {
	run       *config.Node // the guest program's <arg value="--run=guest-scenario ...">
	exit      *config.Node // its <exit propagate="yes">, if any
	cpus      int          // its vCPUs (--cpus)
	remote    string       // the address the guest scenario's vm tests to
	addresses []string     // guest-linux-router's UPLINK ROUTER VM
}

// findGuest finds the QEMU guest that runs a scenario with guest-scenario and reads the
// addresses of that scenario in dir.
func findGuest(root *config.Node, dir string) (guest, error) {
	g := guest{cpus: 1}
	for _, st := range root.Subs("start") {
		cfg := st.Sub("config")
		if cfg == nil {
			continue
		}
		for _, a := range cfg.Subs("arg") {
			v := a.String("value", "")
			if f := strings.Fields(v); len(f) > 1 && f[0] == "--run=guest-scenario" {
				g.run, g.exit = a, st.Sub("exit")
				file := filepath.Join(dir, filepath.Base(f[1]))
				var err error
				if g.addresses, g.remote, err = GuestAddresses(file); err != nil {
					return g, err
				}
			}
			if n, ok := strings.CutPrefix(v, "--cpus="); ok {
				cpus, err := strconv.Atoi(n)
				if err != nil || cpus < 1 {
					return g, config.Errorf(a.Pos, "%q: want a number of vCPUs", v)
				}
				g.cpus = cpus
			}
		}
	}
	if g.run == nil {
		return g, errors.New("no QEMU guest runs a scenario (<arg value=\"--run=guest-scenario FILE ...\"/>)")
	}
	return g, nil
}

// GuestAddresses reads from the guest scenario at file the addresses the reference takes
// over (guest-linux-router's UPLINK ROUTER VM): the uplink address of nic_router's domain with the <nat>, the interface of the
// domain it translates for, the first address that domain's DHCP server leases (the vm's),
// and where the vm's iperf test goes.
func GuestAddresses(file string) (addrs []string, remote string, err error) {
	root, err := config.ParseFile(file)
	if err != nil {
		return nil, "", err
	}
	domains := map[string]*config.Node{}
	var uplink, inside *config.Node
	for _, st := range root.Subs("start") {
		cfg := st.Sub("config")
		if cfg == nil {
			continue
		}
		for _, dom := range cfg.Subs("domain") {
			domains[dom.Name()] = dom
			if nat := dom.Sub("nat"); nat != nil {
				uplink = dom
			}
		}
		if cmd, err := iperf.ParseCommand(strings.Fields(cfg.String("iperf", ""))); err == nil && !cmd.Server {
			remote = cmd.Client
		}
	}
	if uplink != nil {
		inside = domains[uplink.Sub("nat").String("domain", "")]
	}
	if uplink == nil || inside == nil || inside.Sub("dhcp-server") == nil || remote == "" {
		return nil, "", fmt.Errorf("%s: want a nic_router domain with a <nat> for a domain with a <dhcp-server>, and a vm's iperf test", file)
	}
	addrs = []string{uplink.String("interface", ""), inside.String("interface", ""), inside.Sub("dhcp-server").String("ip_first", "")}
	for _, a := range addrs {
		if a == "" || strings.ContainsAny(a, " \"") {
			return nil, "", fmt.Errorf("%s: address %q of the reference's guest: want an interface and a DHCP ip_first", file, a)
		}
	}
	return addrs, remote, nil
}

// parse reads guest-linux-router's markers in the run's output.
func parse(out string, cpus int) (Result, error) {
	var r Result
	m := map[string]string{}
	for _, what := range []string{"irq-start", "irq", "stat-start", "stat", "nat", "iperf", "exit"} {
		v, ok := qemu.FindMarker(out, what)
		if !ok {
			return r, fmt.Errorf("the guest printed no %s%s", qemu.Marker, what)
		}
		m[what] = v
	}
	var rep iperf.Report
	if err := json.Unmarshal([]byte(m["iperf"]), &rep); err != nil {
		return r, fmt.Errorf("the guest's iperf report: %v", err)
	}
	if m["exit"] != "0" || rep.Error != "" {
		return r, fmt.Errorf("the guest's test ended with exit status %s (%s)", m["exit"], rep.Error)
	}
	r.Mbps = rep.Received().BitsPerSecond / 1e6
	if rev := rep.End.SumReceivedBidirReverse; rev != nil {
		r.BidirReverseMbps = rev.BitsPerSecond / 1e6
	}
	t0, err := qemu.ParseCPUTimes(m["stat-start"])
	if err != nil {
		return r, err
	}
	t1, err := qemu.ParseCPUTimes(m["stat"])
	if err != nil {
		return r, err
	}
	r.GuestCPU, r.Seconds = t1.Since(t0, cpus)
	var i0, i1 uint64
	if _, err := fmt.Sscan(m["irq-start"]+" "+m["irq"], &i0, &i1); err != nil || i1 < i0 {
		return r, fmt.Errorf("the guest's interrupt counts %q, %q", m["irq-start"], m["irq"])
	}
	r.IRQPerSecond = float64(i1-i0) / r.Seconds
	if _, err := fmt.Sscan(m["nat"], &r.NATPackets, &r.NATConnections); err != nil {
		return r, fmt.Errorf("the guest's nat marker %q: %v", m["nat"], err)
	}
	return r, nil
}

// console keeps a run's output for the guest's markers.
type console struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (c *console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.Write(p)
}

func (c *console) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}
