package iperf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/nicstack/nicstack/internal/iperf"
)

// reference is a path --compare measures: kernel or pasta, at an MTU (0: the path's default as
// the baseline script runs it: 1500 on the kernel's veths, 65520 on pasta's TAP).
type reference struct {
	name string
	mtu  int
}

// parseReference reads NAME or NAME@MTU.
func parseReference(s string) (reference, error) {
	name, mtu, hasMTU := strings.Cut(s, "@")
	r := reference{name: name}
	if name == "qemu-user" || name == "qemu-tap" || name == "passt" {
		if hasMTU {
			return r, fmt.Errorf("--compare %q: the QEMU references take no MTU", s)
		}
		return r, nil
	}
	if name != "kernel" && name != "pasta" && name != "relay" {
		return r, fmt.Errorf("--compare %q: expected kernel, pasta, relay (optionally with @MTU: kernel@65000), qemu-user, qemu-tap or passt", s)
	}
	if hasMTU {
		n, err := strconv.Atoi(mtu)
		if err != nil || n < 576 || n > 65520 {
			return r, fmt.Errorf("--compare %q: MTU %q is not a number in 576..65520", s, mtu)
		}
		r.mtu = n
	}
	return r, nil
}

func (r reference) String() string {
	switch {
	case r.mtu > 0:
		return fmt.Sprintf("%s@%d", r.name, r.mtu)
	case r.name == "kernel":
		return "kernel (veth MTU 1500)"
	case r.name == "relay":
		return "relay (one process, TAP to TAP, MTU 1500)"
	case r.name == "qemu-user":
		return "qemu-user (QEMU's slirp)"
	case r.name == "qemu-tap":
		return "qemu-tap (TAP, kernel NAT)"
	case r.name == "passt":
		return "passt (QEMU's stream socket)"
	case guestReferences[r.name].title != "":
		return r.name + " (" + guestReferences[r.name].title + ")"
	default:
		return "pasta (its MTU 65520)"
	}
}

// shape says what the reference runs.
func (r reference) shape() string {
	if r.isQEMU() || guestReferences[r.name].title != "" {
		return "the same QEMU guest"
	}
	return "same topology in namespaces"
}

// isQEMU says whether the reference runs the QEMU guest.
func (r reference) isQEMU() bool { return strings.HasPrefix(r.name, "qemu-") || r.name == "passt" }

// measureReference measures the reference path with real iperf3 in namespaces made here (the
// shape of /work/shared/baselines/run.sh, whose third argument is ref's MTU): "kernel" is server
// <-veth-> Linux forwarding <-veth-> guest; "pasta" gives the guest pasta's TAP, carried over
// sockets to the server's namespace; "relay" joins a TAP in each namespace through this
// process (tapRelay). Everything it makes is deleted on return, also on error
// and Ctrl-C (ctx). The point has the throughput, and the path's cost (kernel, pasta) or its
// processes' CPU (the QEMU references).
func measureReference(ctx context.Context, ref reference, t iperfTest, dir string) (point, error) {
	if ref.isQEMU() {
		return measureQEMU(ctx, ref, t, dir)
	}
	mbps, cpu, err := measureNamespaces(ctx, ref, t, dir)
	return point{Mbps: mbps, GbitPerCPUSecond: gbitPerCPUSecond(mbps, cpu)}, err
}

func measureNamespaces(ctx context.Context, ref reference, t iperfTest, dir string) (mbps, cpu float64, err error) {
	mode := ref.name
	if os.Geteuid() != 0 {
		return 0, 0, errors.New("needs root (network namespaces)")
	}
	if _, err := exec.LookPath("iperf3"); err != nil {
		return 0, 0, err
	}
	if mode == "pasta" {
		if _, err := exec.LookPath("pasta"); err != nil {
			return 0, 0, fmt.Errorf("pasta is not installed: %w", err)
		}
	}
	p := fmt.Sprintf("nsbi%d", os.Getpid())
	r := &refRun{ctx: ctx}
	defer r.cleanup()
	srv, rtr, vm := p+"s", p+"r", p+"v"
	client := append(append([]string{"iperf3", "-J"}, t.args()...),
		directionArgs(&iperf.Command{Reverse: dir == dirRX, Bidir: dir == dirBidir})...)
	var argv []string
	switch mode {
	case "kernel":
		r.ns(srv, rtr, vm)
		r.ip("link", "add", p+"a", "type", "veth", "peer", "name", p+"b")
		r.ip("link", "set", p+"a", "netns", srv)
		r.ip("link", "set", p+"b", "netns", rtr)
		r.ip("link", "add", p+"c", "type", "veth", "peer", "name", p+"d")
		r.ip("link", "set", p+"c", "netns", rtr)
		r.ip("link", "set", p+"d", "netns", vm)
		for _, a := range [][3]string{{srv, p + "a", "198.18.0.2/24"}, {rtr, p + "b", "198.18.0.1/24"},
			{rtr, p + "c", "198.19.0.1/24"}, {vm, p + "d", "198.19.0.2/24"}} {
			r.ip("-n", a[0], "addr", "add", a[2], "dev", a[1])
			r.ip("-n", a[0], "link", "set", a[1], "up")
			if ref.mtu > 0 {
				r.ip("-n", a[0], "link", "set", a[1], "mtu", strconv.Itoa(ref.mtu))
			}
		}
		r.ip("-n", vm, "route", "add", "default", "via", "198.19.0.1")
		r.ip("-n", srv, "route", "add", "198.19.0.0/24", "via", "198.18.0.1")
		r.run("ip", "netns", "exec", rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1")
		argv = append([]string{"ip", "netns", "exec", vm}, append(client, "-c", "198.18.0.2")...)
	case "pasta":
		r.nsWithRoute(srv, p)
		// pasta's guest reaches the namespace's own sockets through the gateway address.
		argv = []string{"ip", "netns", "exec", srv, "pasta", "--runas", "0", "--config-net", "-q"}
		if ref.mtu > 0 {
			argv = append(argv, "--mtu", strconv.Itoa(ref.mtu))
		}
		argv = append(append(argv, "--"), append(client, "-c", "198.18.0.1")...)
	case "relay":
		r.ns(srv, vm)
		if r.err != nil {
			break
		}
		mtu := ref.mtu
		if mtu == 0 {
			mtu = 1500
		}
		relay, err := startRelay(srv, vm, p, mtu)
		if err != nil {
			return 0, 0, err
		}
		defer relay.close()
		r.ip("-n", srv, "addr", "add", "198.18.0.2/24", "dev", p+"a")
		r.ip("-n", vm, "addr", "add", "198.18.0.3/24", "dev", p+"b")
		defer func() { cpu += relay.cpu(t.total()) }()
		argv = append([]string{"ip", "netns", "exec", vm}, append(client, "-c", "198.18.0.2")...)
	default:
		return 0, 0, fmt.Errorf("unknown reference %q", mode)
	}
	if r.err != nil {
		return 0, 0, r.err
	}
	server := exec.CommandContext(ctx, "ip", "netns", "exec", srv, "iperf3", "-s", "-1")
	if err := server.Start(); err != nil {
		return 0, 0, err
	}
	r.procs = append(r.procs, server)
	time.Sleep(400 * time.Millisecond) // the server binds
	var out bytes.Buffer
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Stdout = &out
	if err := c.Run(); err != nil {
		return 0, 0, fmt.Errorf("%v: %v", argv, err)
	}
	var rep iperf.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return 0, 0, fmt.Errorf("iperf3's JSON: %v", err)
	}
	if rep.Error != "" {
		return 0, 0, errors.New(rep.Error)
	}
	cpu = endsCPU(&rep)
	if mode == "pasta" && cpu > 0 {
		// pasta carries the traffic in its own process (iperf3's client is its child, counted
		// in the report): its CPU time over the test is the path's too.
		own := c.ProcessState.UserTime() + c.ProcessState.SystemTime()
		cpu += 100 * own.Seconds() / t.total().Seconds()
	}
	return bothWays(&rep), cpu, nil
}

// refRun makes namespaces and links, keeping the first error, and removes them in cleanup.
type refRun struct {
	ctx   context.Context
	nss   []string
	procs []*exec.Cmd
	err   error
}

func (r *refRun) run(argv ...string) {
	if r.err != nil {
		return
	}
	if out, err := exec.CommandContext(r.ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
		r.err = fmt.Errorf("%v: %v: %s", argv, err, bytes.TrimSpace(out))
	}
}

func (r *refRun) ip(args ...string) { r.run(append([]string{"ip"}, args...)...) }

func (r *refRun) ns(names ...string) {
	for _, n := range names {
		r.run("ip", "netns", "add", n)
		if r.err != nil {
			return
		}
		r.nss = append(r.nss, n)
		r.ip("-n", n, "link", "set", "lo", "up")
	}
}

// nsWithRoute makes namespace ns with a default route, as pasta and passt need to take their
// guest's address and gateway from: 198.18.0.2/24 on veth PREFIXa, via 198.18.0.1; the veth's
// peer PREFIXb stays in ns, so nothing leaves it.
func (r *refRun) nsWithRoute(ns, prefix string) {
	r.ns(ns)
	r.ip("link", "add", prefix+"a", "type", "veth", "peer", "name", prefix+"b")
	r.ip("link", "set", prefix+"a", "netns", ns)
	r.ip("link", "set", prefix+"b", "netns", ns)
	r.ip("-n", ns, "addr", "add", "198.18.0.2/24", "dev", prefix+"a")
	r.ip("-n", ns, "link", "set", prefix+"a", "up")
	r.ip("-n", ns, "link", "set", prefix+"b", "up")
	r.ip("-n", ns, "route", "add", "default", "via", "198.18.0.1", "dev", prefix+"a", "onlink")
}

// cleanup kills what was started and deletes the namespaces (their veths go with them). It
// runs with a fresh context: ctx may be cancelled already.
func (r *refRun) cleanup() {
	for _, p := range r.procs {
		if p.Process != nil {
			p.Process.Kill()
			p.Wait()
		}
	}
	for _, n := range r.nss {
		if pids, err := exec.Command("ip", "netns", "pids", n).Output(); err == nil {
			for _, f := range bytes.Fields(pids) {
				if pid, err := strconv.Atoi(string(f)); err == nil {
					if proc, err := os.FindProcess(pid); err == nil {
						proc.Kill()
					}
				}
			}
		}
		exec.Command("ip", "netns", "del", n).Run()
	}
}
