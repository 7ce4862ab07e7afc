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

	"github.com/nicstack/nicstack/internal/qemu"
	"github.com/nicstack/nicstack/iperf"
)

// The QEMU references run the test guest of qemu_iperf (internal/qemu) on QEMU's own
// networks, its test against a real iperf3: "qemu-user" on QEMU's user networking (slirp),
// the server on the host's loopback (slirp's 10.0.2.2); "qemu-tap" on a TAP into a namespace
// made here in the shape of libvirt's default network: the TAP at 192.168.122.1 with a DHCP
// server (busybox udhcpd, where libvirt runs dnsmasq), forwarding and masquerading (nftables)
// through a veth to a server namespace at 198.18.0.2. QEMU's vhost-net is left off, as TCG
// would not use it.

// guestReport is the marker before the guest's one-line iperf JSON report.
const guestReport = "json "

func measureQEMU(ctx context.Context, ref reference, d time.Duration, dir string) (float64, error) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		return 0, err
	}
	im, err := qemu.BuildImage(ctx)
	if err != nil {
		return 0, err
	}
	client := []string{"-t", strconv.Itoa(int(d.Seconds() + 0.5)), "-J"}
	client = append(client, directionArgs(&iperf.Command{Reverse: dir == dirRX, Bidir: dir == dirBidir})...)
	cfg := qemu.Config{Image: im}
	var server []string
	r := &refRun{ctx: ctx}
	defer r.cleanup()
	switch ref.name {
	case "qemu-user":
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		cfg.Netdev = "user,id=" + qemu.NetID
		server = []string{"iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", strconv.Itoa(port)}
		client = append(client, "-c", "10.0.2.2", "-p", strconv.Itoa(port))
	case "qemu-tap":
		if os.Geteuid() != 0 {
			return 0, errors.New("needs root (network namespaces, TAP)")
		}
		p := fmt.Sprintf("nsbq%d", os.Getpid())
		host, srv, tap := p+"h", p+"s", p+"t"
		conf, err := udhcpdConfig(tap)
		if err != nil {
			return 0, err
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
			return 0, r.err
		}
		dhcpd := exec.CommandContext(ctx, "ip", "netns", "exec", host, "busybox", "udhcpd", "-f", conf)
		if err := dhcpd.Start(); err != nil {
			return 0, err
		}
		r.procs = append(r.procs, dhcpd)
		cfg.Netdev = "tap,id=" + qemu.NetID + ",ifname=" + tap + ",script=no,downscript=no"
		cfg.Under = []string{"ip", "netns", "exec", host}
		server = []string{"ip", "netns", "exec", srv, "iperf3", "-s", "-1"}
		client = append(client, "-c", "198.18.0.2")
	default:
		return 0, fmt.Errorf("unknown reference %q", ref.name)
	}
	srvCmd := exec.CommandContext(ctx, server[0], server[1:]...)
	if err := srvCmd.Start(); err != nil {
		return 0, err
	}
	r.procs = append(r.procs, srvCmd)
	cfg.Run = "nicstack iperf " + strings.Join(client, " ") + " > /r; echo " + qemu.Marker + guestReport + "$(tr -d '\\n' < /r)"
	vm, err := qemu.Start(cfg, nil)
	if err != nil {
		return 0, err
	}
	defer vm.Kill()
	wait, cancel := context.WithTimeout(ctx, d+90*time.Second)
	defer cancel()
	line, err := vm.WaitMarker(wait, guestReport)
	if err != nil {
		return 0, fmt.Errorf("%v\n%s", err, vm.Console())
	}
	var rep iperf.Report
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		return 0, fmt.Errorf("the guest's iperf JSON: %v", err)
	}
	if rep.Error != "" {
		return 0, errors.New(rep.Error)
	}
	return bothWays(&rep), nil
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
