// Package netns creates, enters and deletes network namespaces and veth pairs, for root tests
// and benchmarks of the Linux back ends (backendtest.Namespace ties one to a test), and enters
// a namespace by descriptor for the back ends themselves (Do), and names another's namespace
// (a container's) for the run's use (Adopt). Everything it creates is deleted
// on Close, on SIGINT/SIGTERM/SIGHUP, and (for namespaces left by a killed process) by the next
// process that creates one. Addresses are confined to 198.18.0.0/15, the benchmarking range.
package netns

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/runtime/leftover"
)

// namePrefix marks namespaces made by this package: "nst<pid>-<label><seq>", so a later process
// can tell which ones a dead process left behind.
const namePrefix = "nst"

const runDir = "/run/netns"

// benchRange is the only address range this package configures (RFC 2544 benchmarking).
var benchRange = netip.MustParsePrefix("198.18.0.0/15")

// NS is a named network namespace (as `ip netns add` makes it).
type NS struct {
	Name string
	File *os.File // open /run/netns/<Name>: pass it to Do, or to a driver's NetNS option
}

var (
	seq      atomic.Uint64
	liveMu   sync.Mutex
	live     = map[string]bool{}
	sigOnce  sync.Once
	sweepOne sync.Once
)

// New creates a namespace named after label (unique per process) with its loopback up.
func New(label string) (*NS, error) {
	sweepOne.Do(func() { Sweep() })
	sigOnce.Do(cleanupOnSignal)
	name := fmt.Sprintf("%s%d-%s%d", namePrefix, os.Getpid(), label, seq.Add(1))
	liveMu.Lock()
	live[name] = true
	liveMu.Unlock()
	if err := ip("netns", "add", name); err != nil {
		forget(name)
		return nil, err
	}
	n := &NS{Name: name}
	f, err := os.Open(filepath.Join(runDir, name))
	if err != nil {
		n.Close()
		return nil, err
	}
	n.File = f
	if err := n.IP("link", "set", "lo", "up"); err != nil {
		n.Close()
		return nil, err
	}
	// IPv4 only unless a test turns IPv6 back on: no router solicitations, DAD or MLD frames
	// on the interfaces under test.
	for _, k := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
		if err := n.Sysctl(k, "1"); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// adoptedPrefix marks the names this package gives namespaces it did not make (Adopt):
// "nsa<pid>-<label><seq>". Sweep unmounts a dead process's, and kills nothing inside them.
const adoptedPrefix = "nsa"

// Adopt names the existing namespace at path (another's: a container's, as a CNI runtime
// bind-mounts it under /run/netns or /var/run/netns) for this process, with a bind mount in
// /run/netns, so that it is used as a namespace New made. Close removes only the name: the
// namespace lives on as long as its owner holds it. The host's own namespace is refused.
func Adopt(label, path string) (*NS, error) {
	sigOnce.Do(cleanupOnSignal)
	var target, self unix.Stat_t
	if err := unix.Stat(path, &target); err != nil {
		return nil, fmt.Errorf("namespace %s: %w", path, err)
	}
	if err := unix.Stat("/proc/1/ns/net", &self); err == nil && target.Dev == self.Dev && target.Ino == self.Ino {
		return nil, fmt.Errorf("namespace %s is the host's", path)
	}
	name := fmt.Sprintf("%s%d-%s%d", adoptedPrefix, os.Getpid(), label, seq.Add(1))
	mount := filepath.Join(runDir, name)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(mount, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return nil, err
	}
	f.Close()
	liveMu.Lock()
	live[name] = true
	liveMu.Unlock()
	n := &NS{Name: name}
	if err := unix.Mount(path, mount, "", unix.MS_BIND, ""); err != nil {
		n.Close()
		return nil, fmt.Errorf("namespace %s: bind mount: %w", path, err)
	}
	if n.File, err = os.Open(mount); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// Close deletes the namespace and, with it, every interface in it; of an adopted namespace,
// only its name here.
func (n *NS) Close() error {
	if n.File != nil {
		n.File.Close()
	}
	err := ip("netns", "del", n.Name)
	forget(n.Name)
	return err
}

// IP runs `ip <args>` inside the namespace.
func (n *NS) IP(args ...string) error {
	return ip(append([]string{"-n", n.Name}, args...)...)
}

// Exec runs a program inside the namespace and returns its combined output.
func (n *NS) Exec(prog string, args ...string) ([]byte, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", n.Name, prog}, args...)...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s in %s: %v: %s", prog, strings.Join(args, " "), n.Name, err, out)
	}
	return out, nil
}

// Sysctl sets a sysctl inside the namespace (key as in `sysctl -w`, e.g. net.ipv4.ip_forward).
func (n *NS) Sysctl(key, value string) error {
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	return n.Do(func() error { return os.WriteFile(path, []byte(value), 0) })
}

// AddrAdd puts prefix (which must lie in 198.18.0.0/15) on dev and brings dev up.
func (n *NS) AddrAdd(dev, prefix string) error {
	p, err := netip.ParsePrefix(prefix)
	if err != nil {
		return err
	}
	if !benchRange.Contains(p.Addr()) || p.Bits() < benchRange.Bits() {
		return fmt.Errorf("netns: %s is outside %s", prefix, benchRange)
	}
	if err := n.IP("addr", "add", prefix, "dev", dev); err != nil {
		return err
	}
	return n.IP("link", "set", dev, "up")
}

// Veth creates a veth pair with end a in namespace na and end b in nb, both up.
func Veth(a string, na *NS, b string, nb *NS) error {
	if err := na.IP("link", "add", a, "type", "veth", "peer", "name", b, "netns", nb.Name); err != nil {
		return err
	}
	if err := na.IP("link", "set", a, "up"); err != nil {
		return err
	}
	return nb.IP("link", "set", b, "up")
}

// Do runs fn on an OS thread switched into the namespace ns (an open /run/netns/X or
// /proc/PID/ns/net). Sockets and TAPs opened inside fn stay in that namespace afterwards.
func (n *NS) Do(fn func() error) error { return Do(n.File, fn) }

// Do runs fn on an OS thread switched into the network namespace open as ns.
func Do(ns *os.File, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		// A fresh goroutine: if switching back fails, it exits still locked and Go discards the
		// thread instead of reusing it in the wrong namespace.
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netns: setns: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- errors.Join(ferr, fmt.Errorf("netns: switching back: %w", err))
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func forget(name string) {
	liveMu.Lock()
	delete(live, name)
	liveMu.Unlock()
}

// LeaveSignals tells the package that the program stops itself in order on SIGINT, SIGTERM and
// SIGHUP and closes its namespaces then (as the supervisor does): the package installs no
// handler of its own, which would exit before that orderly stop could run.
func LeaveSignals() { sigOnce.Do(func() {}) }

// cleanupOnSignal deletes this process's namespaces when it is interrupted, then exits.
func cleanupOnSignal() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-c
		liveMu.Lock()
		for name := range live {
			ip("netns", "del", name)
		}
		liveMu.Unlock()
		fmt.Fprintf(os.Stderr, "netns: %v: deleted this process's namespaces\n", s)
		os.Exit(128 + int(s.(syscall.Signal)))
	}()
}

// Sweep deletes the namespaces this package made in processes that no longer exist (killed
// with SIGKILL, so their cleanup never ran), after killing the processes still inside them (a
// command started in one outlives the process that made it), removes the names such processes
// gave namespaces they adopted, and says what it removed.
func Sweep() []string {
	entries, _ := os.ReadDir(runDir)
	var removed []string
	for _, e := range entries {
		if leftover.Orphaned(e.Name(), adoptedPrefix) && ip("netns", "del", e.Name()) == nil {
			removed = append(removed, "the name of another's namespace "+e.Name())
			continue
		}
		if !leftover.Orphaned(e.Name(), namePrefix) {
			continue
		}
		path := filepath.Join(runDir, e.Name())
		for _, pid := range killInside(path) {
			removed = append(removed, fmt.Sprintf("process %d in namespace %s", pid, e.Name()))
		}
		if ip("netns", "del", e.Name()) == nil {
			removed = append(removed, "namespace "+e.Name())
		}
	}
	return removed
}

// killInside kills every process in the network namespace mounted at path, until none is
// left (one may fork while we look), and returns their pids.
func killInside(path string) []int {
	var ns unix.Stat_t
	if unix.Stat(path, &ns) != nil {
		return nil
	}
	var killed []int
	for round := 0; round < 10; round++ {
		procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
		found := false
		for _, p := range procs {
			var st unix.Stat_t
			if unix.Stat(p, &st) != nil || st.Ino != ns.Ino || st.Dev != ns.Dev {
				continue
			}
			pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
			if pid == os.Getpid() || !leftover.Alive(pid) {
				continue
			}
			found = true
			if syscall.Kill(pid, syscall.SIGKILL) == nil && !slices.Contains(killed, pid) {
				killed = append(killed, pid)
			}
		}
		if !found {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return killed
}
