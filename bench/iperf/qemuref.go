package iperf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/internal/qemu"
)

// The QEMU references run the test guest of qemu_iperf (internal/qemu) on QEMU's own
// networks, its test against a real iperf3: "qemu-user" on QEMU's user networking (slirp),
// the server on the host's loopback (slirp's 10.0.2.2); "qemu-tap" on a TAP into a namespace
// made here in the shape of libvirt's default network: the TAP at 192.168.122.1 with a DHCP
// server (busybox udhcpd, where libvirt runs dnsmasq), forwarding and masquerading (nftables)
// through a veth to a server namespace at 198.18.0.2. QEMU's vhost-net is left off, as TCG
// would not use it. "passt" connects QEMU's stream netdev to passt, which runs in a namespace
// made here with iperf3's server (the guest reaches it at passt's gateway address, which passt
// maps to the namespace's loopback); the namespace has no route out of itself.
//
// Each reports the CPU of its processes (QEMU, passt) and of the whole machine while the
// guest's iperf ran, in percent of one CPU: what the kernel does for the TAP or for passt's
// sockets is counted only in the machine's.

// guestReport is the marker before the guest's one-line iperf JSON report.
const guestReport = "json "

// guestStart is the marker the guest prints as its iperf starts.
const guestStart = "iperf-start"

func measureQEMU(ctx context.Context, ref reference, t iperfTest, dir string) (point, error) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		return point{}, err
	}
	im, err := qemu.BuildImage(ctx)
	if err != nil {
		return point{}, err
	}
	client := append(t.args(), "-J")
	client = append(client, directionArgs(&iperf.Command{Reverse: dir == dirRX, Bidir: dir == dirBidir})...)
	cfg := qemu.Config{Image: im}
	var server []string
	var passt *exec.Cmd
	r := &refRun{ctx: ctx}
	defer r.cleanup()
	switch ref.name {
	case "qemu-user":
		port, err := freePort()
		if err != nil {
			return point{}, err
		}
		cfg.Netdev = "user,id=" + qemu.NetID
		server = []string{"iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", strconv.Itoa(port)}
		client = append(client, "-c", "10.0.2.2", "-p", strconv.Itoa(port))
	case "qemu-tap":
		if os.Geteuid() != 0 {
			return point{}, errors.New("needs root (network namespaces, TAP)")
		}
		p := fmt.Sprintf("nsbq%d", os.Getpid())
		host, srv, tap := p+"h", p+"s", p+"t"
		conf, err := udhcpdConfig(tap)
		if err != nil {
			return point{}, err
		}
		defer os.RemoveAll(filepath.Dir(conf))
		r.ns(host, srv)
		r.ip("link", "add", p+"a", "type", "veth", "peer", "name", p+"b")
		r.ip("link", "set", p+"a", "netns", srv)
		r.ip("link", "set", p+"b", "netns", host)
		r.ip("-n", srv, "addr", "add", "198.18.0.2/24", "dev", p+"a")
		r.ip("-n", host, "addr", "add", "198.18.0.1/24", "dev", p+"b")
		r.ip("-n", host, "tuntap", "add", "dev", tap, "mode", "tap")
		r.ip("-n", host, "addr", "add", "192.168.122.1/24", "dev", tap)
		for _, l := range [][2]string{{srv, p + "a"}, {host, p + "b"}, {host, tap}} {
			r.ip("-n", l[0], "link", "set", l[1], "up")
		}
		r.run("ip", "netns", "exec", host, "sysctl", "-qw", "net.ipv4.ip_forward=1")
		r.run("ip", "netns", "exec", host, "nft", "add table ip nat; add chain ip nat post { type nat hook postrouting priority 100; }; "+
			"add rule ip nat post ip saddr 192.168.122.0/24 oifname "+p+"b masquerade")
		if r.err != nil {
			return point{}, r.err
		}
		dhcpd := exec.CommandContext(ctx, "ip", "netns", "exec", host, "busybox", "udhcpd", "-f", conf)
		if err := dhcpd.Start(); err != nil {
			return point{}, err
		}
		r.procs = append(r.procs, dhcpd)
		cfg.Netdev = "tap,id=" + qemu.NetID + ",ifname=" + tap + ",script=no,downscript=no"
		cfg.Under = []string{"ip", "netns", "exec", host}
		server = []string{"ip", "netns", "exec", srv, "iperf3", "-s", "-1"}
		client = append(client, "-c", "198.18.0.2")
	case "passt":
		if os.Geteuid() != 0 {
			return point{}, errors.New("needs root (a network namespace for passt)")
		}
		if _, err := exec.LookPath("passt"); err != nil {
			return point{}, fmt.Errorf("passt is not installed: %w", err)
		}
		tmp, err := os.MkdirTemp("", "nicstack-passt-")
		if err != nil {
			return point{}, err
		}
		defer os.RemoveAll(tmp)
		p := fmt.Sprintf("nsbq%d", os.Getpid())
		srv, sock := p+"p", filepath.Join(tmp, "passt.sock")
		r.nsWithRoute(srv, p)
		if r.err != nil {
			return point{}, r.err
		}
		// passt drops root before it binds its socket: the folder is its user's.
		if err := os.Chown(tmp, nobody, nobody); err != nil {
			return point{}, err
		}
		passt = exec.CommandContext(ctx, "ip", "netns", "exec", srv, "passt", "-f", "-q", "-1", "-s", sock,
			"--runas", fmt.Sprintf("%d:%d", nobody, nobody))
		var perr strings.Builder
		passt.Stdout, passt.Stderr = &perr, &perr
		if err := passt.Start(); err != nil {
			return point{}, err
		}
		r.procs = append(r.procs, passt)
		if !bench.WaitFor(5*time.Second, func() bool { _, err := os.Stat(sock); return err == nil }) {
			return point{}, fmt.Errorf("passt made no socket %s in 5 s: %s", sock, strings.TrimSpace(perr.String()))
		}
		cfg.Netdev = "stream,id=" + qemu.NetID + ",server=off,addr.type=unix,addr.path=" + sock
		server = []string{"ip", "netns", "exec", srv, "iperf3", "-s", "-1"}
		client = append(client, "-c", "198.18.0.1")
	default:
		return point{}, fmt.Errorf("unknown reference %q", ref.name)
	}
	srvCmd := exec.CommandContext(ctx, server[0], server[1:]...)
	if err := srvCmd.Start(); err != nil {
		return point{}, err
	}
	r.procs = append(r.procs, srvCmd)
	cfg.Run = "echo " + qemu.Marker + guestStart + "; nicstack iperf " + strings.Join(client, " ") + " > /r; echo " + qemu.Marker + guestReport + "$(tr -d '\\n' < /r)"
	vm, err := qemu.Start(cfg, nil)
	if err != nil {
		return point{}, err
	}
	defer vm.Kill()
	wait, cancel := context.WithTimeout(ctx, t.total()+90*time.Second)
	defer cancel()
	if _, err := vm.WaitMarker(wait, guestStart); err != nil {
		return point{}, fmt.Errorf("%v\n%s", err, vm.Console())
	}
	pids := map[string]int{"qemu": vm.Pid()}
	if passt != nil {
		pids["passt"] = passt.Process.Pid
	}
	clock := startCPUClock(pids)
	line, err := vm.WaitMarker(wait, guestReport)
	if err != nil {
		return point{}, fmt.Errorf("%v\n%s", err, vm.Console())
	}
	cpu := clock.percent()
	var rep iperf.Report
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		return point{}, fmt.Errorf("the guest's iperf JSON: %v", err)
	}
	if rep.Error != "" {
		return point{}, errors.New(rep.Error)
	}
	return point{Mbps: bothWays(&rep), CPU: cpu}, nil
}

// nobody is the uid and gid passt runs as.
const nobody = 65534

// machine names the whole machine's CPU among a reference's processes.
const machine = "machine"

// cpuClock counts the CPU time of processes (by name) and of the whole machine from its start.
type cpuClock struct {
	pids  map[string]int
	ticks map[string]uint64
	at    time.Time
}

func startCPUClock(pids map[string]int) cpuClock {
	c := cpuClock{pids: pids, at: time.Now()}
	c.ticks = c.read()
	return c
}

// percent is each one's CPU since the start, in percent of one CPU.
func (c cpuClock) percent() map[string]float64 {
	now, secs := c.read(), time.Since(c.at).Seconds()
	cpu := map[string]float64{}
	for name, t := range now {
		if t0, ok := c.ticks[name]; ok && secs > 0 {
			cpu[name] = float64(t-t0) / 100 / secs * 100 // USER_HZ ticks
		}
	}
	return cpu
}

// read is each process's user and system ticks with its children's (passt works in a child
// of the process it starts as), and the machine's ticks busy on any CPU (/proc/stat, all but
// idle and iowait).
func (c cpuClock) read() map[string]uint64 {
	ticks := map[string]uint64{}
	for name, pid := range c.pids {
		ticks[name] = bench.TreeTicks(pid)
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return ticks
	}
	cpuLine, _, _ := strings.Cut(string(b), "\n")
	var busy uint64
	for i, f := range strings.Fields(cpuLine)[1:] {
		if v, err := strconv.ParseUint(f, 10, 64); err == nil && i != 3 && i != 4 && i < 8 {
			busy += v // user nice system (idle iowait) irq softirq steal; guest is in user
		}
	}
	ticks[machine] = busy
	return ticks
}

// udhcpdConfig writes busybox udhcpd's config for the TAP: one lease, the host side as router.
func udhcpdConfig(iface string) (string, error) {
	dir, err := os.MkdirTemp("", "nicstack-udhcpd-")
	if err != nil {
		return "", err
	}
	conf := filepath.Join(dir, "udhcpd.conf")
	text := fmt.Sprintf("start 192.168.122.2\nend 192.168.122.254\ninterface %s\noption subnet 255.255.255.0\n"+
		"option router 192.168.122.1\nlease_file %s\npidfile %s\n", iface, filepath.Join(dir, "leases"), filepath.Join(dir, "pid"))
	return conf, os.WriteFile(conf, []byte(text), 0o644)
}

// freePort is a loopback TCP port nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
