// Package testpmd runs DPDK's dpdk-testpmd (Debian's dpdk-dev) as a front end nobody here
// wrote: a virtio-user port on a vhost-user socket (--vdev net_virtio_user0) that sends
// (txonly), counts (rxonly) or answers ARP and ping (icmpecho), or as DPDK's own vhost
// switch, net_vhost ports forwarded to each other (io). It drives testpmd interactively over
// stdin, one command at a time up to its next prompt, so that counters are read when the
// caller asks (not when a stats period happens to fall), and parses the per-port and
// per-queue counters of "show port xstats all" and the forwarding drops "stop" prints.
package testpmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nicstack/nicstack/runtime/leftover"
)

// Binary is the program; Debian's dpdk-dev installs it in /usr/bin.
const Binary = "dpdk-testpmd"

// Forwarding modes (--forward-mode).
const (
	IO       = "io"       // each port's frames out of its pair port: the vhost switch
	TxOnly   = "txonly"   // send UDP frames of TxPkts bytes as fast as the port takes them
	RxOnly   = "rxonly"   // receive and count
	ICMPEcho = "icmpecho" // answer ARP requests and pings, count the rest
)

// VirtioUser is a virtio-user port: testpmd the driver of a virtio-net device whose back end
// listens on Path (vhost-user).
type VirtioUser struct {
	Path      string
	Queues    int              // queue pairs (0: 1)
	MAC       net.HardwareAddr // nil: testpmd picks a random one
	Packed    bool             // packed virtqueues (packed_vq=1)
	Mergeable bool             // mergeable RX buffers (mrg_rxbuf=1), for frames over one buffer
	InOrder   bool             // in-order descriptors (in_order=1)
	QueueSize int              // entries per virtqueue (0: the driver's 256)
}

func (v VirtioUser) vdev(i int) string {
	s := fmt.Sprintf("net_virtio_user%d,path=%s,queues=%d,packed_vq=%d,mrg_rxbuf=%d,in_order=%d",
		i, v.Path, max(v.Queues, 1), b2i(v.Packed), b2i(v.Mergeable), b2i(v.InOrder))
	if v.MAC != nil {
		s += ",mac=" + v.MAC.String()
	}
	if v.QueueSize > 0 {
		s += ",queue_size=" + strconv.Itoa(v.QueueSize)
	}
	return s
}

// Vhost is a net_vhost port: testpmd the vhost-user back end, listening on Iface.
type Vhost struct {
	Iface  string
	Queues int // queue pairs (0: 1)
}

func (v Vhost) vdev(i int) string {
	return fmt.Sprintf("net_vhost%d,iface=%s,queues=%d", i, v.Iface, max(v.Queues, 1))
}

// Config is one testpmd.
type Config struct {
	Name    string // names its --file-prefix (with this process's pid) and its errors
	CPUs    []int  // the CPUs it may run on; its forwarding core busy-polls CPUs[0] unless Cores > 1
	Cores   int    // forwarding cores (0: 1), placed round-robin on CPUs
	HugeDir string // a mounted hugetlbfs (Hugepages.Dir)
	MemMB   int    // hugepage memory to take (0: 128)
	Mbufs   int    // mbufs in its pool (0: 16384)

	VirtioUser []VirtioUser // the ports, virtio-user ones first
	Vhost      []Vhost

	Forward   string           // IO, TxOnly, RxOnly, ICMPEcho
	Queues    int              // RX and TX queues per port (0: 1)
	TxPkts    []int            // txonly: segment sizes, their sum the frame's length without FCS
	EthPeer   net.HardwareAddr // txonly: destination MAC of port 0
	TxIP      [2]netip.Addr    // txonly: source and destination IPv4
	MultiFlow bool             // txonly: vary the source so that frames spread over queues
	MaxPktLen int              // largest frame it receives (0: testpmd's 1518)
	MbufSize  int              // data room of an mbuf (0: testpmd's 2048 + headroom)
	Scatter   bool             // receive a frame into a chain of mbufs (--enable-scatter), for frames over one
}

// Args is the command line after the binary.
func (c Config) Args(prefix string) []string {
	cores := max(c.Cores, 1)
	lcores := make([]string, 0, cores+1)
	for l := 0; l <= cores; l++ { // lcore 0 is the main core, mostly asleep on the command line
		lcores = append(lcores, fmt.Sprintf("%d@%d", l, c.CPUs[max(l-1, 0)%len(c.CPUs)]))
	}
	a := []string{
		"--lcores", strings.Join(lcores, ","),
		"--no-pci", "--no-telemetry", "--single-file-segments", // a vhost-user memory table has few regions
		"--huge-dir", c.HugeDir, "--file-prefix", prefix,
		"-m", strconv.Itoa(orDefault(c.MemMB, 128)),
	}
	for i, v := range c.VirtioUser {
		a = append(a, "--vdev", v.vdev(i))
	}
	for i, v := range c.Vhost {
		a = append(a, "--vdev", v.vdev(i))
	}
	q := strconv.Itoa(max(c.Queues, 1))
	a = append(a, "--", "-i", "--forward-mode="+c.Forward, "--nb-cores="+strconv.Itoa(cores),
		"--rxq="+q, "--txq="+q, "--total-num-mbufs="+strconv.Itoa(orDefault(c.Mbufs, 16384)),
		"--no-lsc-interrupt")
	if len(c.TxPkts) > 0 {
		s := make([]string, len(c.TxPkts))
		for i, n := range c.TxPkts {
			s[i] = strconv.Itoa(n)
		}
		a = append(a, "--txpkts="+strings.Join(s, ","))
	}
	if c.EthPeer != nil {
		a = append(a, "--eth-peer=0,"+c.EthPeer.String())
	}
	if c.TxIP[0].IsValid() {
		a = append(a, "--tx-ip="+c.TxIP[0].String()+","+c.TxIP[1].String())
	}
	if c.MultiFlow {
		a = append(a, "--txonly-multi-flow")
	}
	if c.MaxPktLen > 0 {
		a = append(a, "--max-pkt-len="+strconv.Itoa(c.MaxPktLen))
	}
	if c.Scatter {
		a = append(a, "--enable-scatter")
	}
	if c.MbufSize > 0 {
		a = append(a, "--mbuf-size="+strconv.Itoa(c.MbufSize))
	}
	return a
}

// Segments splits a frame of size bytes into txonly segments of at most one mbuf's data
// (2048 bytes unless Config.MbufSize says otherwise), as --txpkts takes them.
func Segments(size, mbuf int) []int {
	var s []int
	for ; size > mbuf; size -= mbuf {
		s = append(s, mbuf)
	}
	return append(s, size)
}

// Testpmd is a running testpmd waiting at its prompt.
type Testpmd struct {
	Name   string
	Pid    int
	cmd    *exec.Cmd
	prefix string
	huge   string
	stdin  io.WriteCloser
	out    *output
	exited chan struct{}
	err    error // Wait's, after exited
}

// prefixName names the EAL's files (/var/run/dpdk/PREFIX, PREFIXmap_* in the hugetlbfs) with
// this process's pid, so that a sweep finds the ones of a process that died.
const prefixName = "nstpmd"

const prompt = "testpmd> "

// StartTimeout bounds testpmd's start (EAL, ports, vhost-user connections) to its prompt.
const StartTimeout = 30 * time.Second

// Start runs testpmd in a session (and so a process group and scheduling autogroup) of its
// own and waits for its first prompt. ctx
// ending kills it. Its stdout and stderr are kept (Output) and copied to log when set.
func Start(ctx context.Context, c Config, log io.Writer) (*Testpmd, error) {
	if len(c.CPUs) == 0 || c.HugeDir == "" || c.Forward == "" {
		return nil, fmt.Errorf("testpmd %s: CPUs, HugeDir and Forward are needed", c.Name)
	}
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return nil, fmt.Errorf("testpmd %s: %v (Debian's dpdk-dev installs it)", c.Name, err)
	}
	sweepRuntime()
	prefix := leftover.Named(prefixName) + c.Name
	// testpmd's printf output is block-buffered into a pipe; stdbuf makes it line-buffered so
	// that a command's output is out before the next prompt, which cmdline writes unbuffered.
	args := append([]string{"-oL", "-eL", bin}, c.Args(prefix)...)
	cmd := exec.Command("stdbuf", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out := &output{log: log, changed: make(chan struct{}, 1)}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testpmd %s: %v", c.Name, err)
	}
	t := &Testpmd{Name: c.Name, Pid: cmd.Process.Pid, cmd: cmd, prefix: prefix, huge: c.HugeDir,
		stdin: stdin, out: out, exited: make(chan struct{})}
	go func() {
		t.err = cmd.Wait()
		close(t.exited)
	}()
	go func() {
		select {
		case <-ctx.Done():
			t.kill()
		case <-t.exited:
		}
	}()
	s, err := t.waitPrompt(0, StartTimeout)
	if err == nil && strings.Contains(s, startFailed) {
		err = fmt.Errorf("testpmd %s: ports did not start:\n%s", c.Name, tail(s, 1500))
	}
	if err != nil {
		t.Kill()
		return nil, err
	}
	return t, nil
}

// startFailed is what testpmd prints, and goes on to its prompt, when a port does not start
// (a queue its driver refuses, a socket nobody listens on).
const startFailed = "Start ports failed"

// CommandTimeout bounds one command.
const CommandTimeout = 10 * time.Second

// Command sends line and returns what testpmd printed up to its next prompt, the echoed line
// left out.
func (t *Testpmd) Command(line string) (string, error) {
	from := t.out.len()
	if _, err := io.WriteString(t.stdin, line+"\n"); err != nil {
		return "", fmt.Errorf("testpmd %s: %q: %v", t.Name, line, err)
	}
	s, err := t.waitPrompt(from, CommandTimeout)
	if err != nil {
		return "", fmt.Errorf("%q: %v", line, err)
	}
	s = strings.TrimPrefix(s, line)
	return strings.TrimPrefix(s, "\n"), nil
}

// waitPrompt waits until a prompt follows offset from in the output and returns what lies
// between.
func (t *Testpmd) waitPrompt(from int, timeout time.Duration) (string, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if s, ok := t.out.upToPrompt(from); ok {
			return s, nil
		}
		select {
		case <-t.out.changed:
		case <-t.exited:
			if s, ok := t.out.upToPrompt(from); ok {
				return s, nil
			}
			return "", fmt.Errorf("testpmd %s ended (%v):\n%s", t.Name, t.err, tail(t.out.String(), 2000))
		case <-deadline.C:
			return "", fmt.Errorf("testpmd %s: no prompt within %v:\n%s", t.Name, timeout, tail(t.out.String(), 2000))
		}
	}
}

// Output is everything testpmd printed so far.
func (t *Testpmd) Output() string { return t.out.String() }

// StartForwarding starts the forwarding cores.
func (t *Testpmd) StartForwarding() error {
	s, err := t.Command("start")
	if err == nil && strings.Contains(s, "Not all ports were started") {
		err = fmt.Errorf("testpmd %s: %s", t.Name, strings.TrimSpace(s))
	}
	return err
}

// Stats reads every port's counters ("show port xstats all").
func (t *Testpmd) Stats() ([]PortStats, error) {
	s, err := t.Command("show port xstats all")
	if err != nil {
		return nil, err
	}
	return ParseXstats(s)
}

// StopForwarding stops the forwarding cores and returns what they could not pass on, per
// port ("stop"'s forward statistics).
func (t *Testpmd) StopForwarding() ([]ForwardStats, error) {
	s, err := t.Command("stop")
	if err != nil {
		return nil, err
	}
	return ParseForwardStats(s), nil
}

// QuitTimeout bounds a clean quit before the process group is killed.
const QuitTimeout = 10 * time.Second

// Quit ends testpmd cleanly ("quit": ports stopped and closed, vhost-user connections ended),
// killing it when it does not end in time, and removes the files its EAL left.
func (t *Testpmd) Quit() error {
	io.WriteString(t.stdin, "quit\n")
	t.stdin.Close()
	select {
	case <-t.exited:
	case <-time.After(QuitTimeout):
		t.Kill()
		return fmt.Errorf("testpmd %s did not quit within %v; killed", t.Name, QuitTimeout)
	}
	t.removeFiles()
	return nil
}

// Kill kills the process group, waits for it and removes the files its EAL left.
func (t *Testpmd) Kill() {
	t.kill()
	<-t.exited
	t.removeFiles()
}

func (t *Testpmd) kill() { syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL) }

func (t *Testpmd) removeFiles() {
	os.RemoveAll(filepath.Join(runtimeDir, t.prefix))
	maps, _ := filepath.Glob(filepath.Join(t.huge, t.prefix+"map_*"))
	for _, m := range maps {
		os.Remove(m)
	}
}

// runtimeDir is where the EAL of a root process keeps its runtime files, one folder per
// --file-prefix.
const runtimeDir = "/var/run/dpdk"

// sweepRuntime removes the runtime folders of testpmds whose starter died (their hugepage
// files went with the hugetlbfs SweepHugepages unmounts).
func sweepRuntime() {
	for _, d := range leftover.Orphans(runtimeDir, prefixName) {
		os.RemoveAll(d)
	}
}

// output keeps what testpmd prints and wakes a waiting command.
type output struct {
	mu      sync.Mutex
	b       bytes.Buffer
	log     io.Writer
	changed chan struct{}
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	o.b.Write(p)
	o.mu.Unlock()
	if o.log != nil {
		o.log.Write(p)
	}
	select {
	case o.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (o *output) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Len()
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// upToPrompt returns the output from offset from to the first prompt after it.
func (o *output) upToPrompt(from int) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.b.Bytes()[from:]
	i := bytes.Index(s, []byte(prompt))
	if i < 0 {
		return "", false
	}
	return string(s[:i]), true
}

// ErrNotInstalled is returned by Installed when the binary is missing.
var ErrNotInstalled = errors.New(Binary + " is not installed (Debian's dpdk-dev; scripts/deps.sh installs it)")

// Installed reports whether testpmd and stdbuf are on PATH.
func Installed() error {
	for _, b := range []string{Binary, "stdbuf"} {
		if _, err := exec.LookPath(b); err != nil {
			if b == Binary {
				return ErrNotInstalled
			}
			return err
		}
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func orDefault(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}
