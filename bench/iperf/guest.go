package iperf

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/bench/linuxref"
	"github.com/nicstack/nicstack/internal/qemu"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// A guest scenario is a host start `nicstack guest ... --run=guest-scenario SCENARIO START DONE
// SECONDS [PCI...]` (deploy/qemu_e1000e): the topology (ipxe_nic on a PCI device through VFIO,
// nic_router, the measuring vm) runs inside a QEMU guest, the iperf server on the host side.
// The bench patches that inner scenario (deploy/'s file of the same name, which the image
// holds in /etc/nicstack) as it patches any other, hands it to the guest on the kernel command
// line, and reads what the guest prints: its supervisor's status at the test's two ends
// (guest-scenario's markers status-start and status) and the guest's CPU times (stat-start,
// stat). Every figure of the driver and the guest's components comes from inside the guest;
// from the host only the throughput (the server's) and QEMU's CPU.
type guestScenario struct {
	arg   *config.Node // the <arg value="--run=guest-scenario ..."/>
	inner *scenario    // the scenario that runs in the guest
	rest  string       // guest-scenario's arguments after the scenario: START DONE SECONDS PCI...
	cpus  int          // the guest's vCPUs (--cpus)
	// linux is guest-linux-router's UPLINK ROUTER VM: the addresses the Linux reference
	// takes over from the inner scenario (linuxref.GuestAddresses).
	linux []string
}

const guestScenarioCommand = "guest-scenario"

// guestScenarioOf reads the guest scenario a host start runs, nil if it runs none; dir is the
// host scenario's folder, which holds the inner one. The start's <exit propagate> goes: the
// bench ends each run itself once the guest has printed its figures.
func guestScenarioOf(st *config.Node, dir string) (*guestScenario, error) {
	cfg := st.Sub("config")
	if startBinary(st) != "nicstack" || cfg == nil {
		return nil, nil
	}
	g := &guestScenario{cpus: 1}
	for _, a := range cfg.Subs("arg") {
		v := a.String("value", "")
		if n, ok := strings.CutPrefix(v, "--cpus="); ok {
			var err error
			if g.cpus, err = strconv.Atoi(n); err != nil || g.cpus < 1 {
				return nil, config.Errorf(a.Pos, "%s: want a number of vCPUs", v)
			}
		}
		run, ok := strings.CutPrefix(v, "--run=")
		f := strings.Fields(run)
		if !ok || len(f) == 0 || f[0] != guestScenarioCommand {
			continue
		}
		if len(f) < 5 {
			return nil, config.Errorf(a.Pos, "%s: want %s SCENARIO START DONE SECONDS [PCI...]", v, guestScenarioCommand)
		}
		file := filepath.Join(dir, filepath.Base(f[1]))
		inner, err := loadScenario(file)
		if err != nil {
			return nil, config.Errorf(a.Pos, "the guest's scenario: %v", err)
		}
		if g.linux, _, err = linuxref.GuestAddresses(file); err != nil {
			return nil, config.Errorf(a.Pos, "the guest's scenario: %v", err)
		}
		if len(inner.clients) != 1 || inner.clients[0].cfg == nil || inner.clients[0].netns != "" {
			return nil, config.Errorf(a.Pos, "the guest's scenario %s: want one embedded guest that runs the iperf client", f[1])
		}
		g.arg, g.inner, g.rest = a, inner, strings.Join(f[2:], " ")
	}
	if g.arg == nil {
		return nil, nil
	}
	st.Remove("exit")
	return g, nil
}

// maxGuestCommand keeps the guest's command within the kernel command line (2048 bytes on
// x86, which also carries the console and IOMMU parameters).
const maxGuestCommand = 1700

// command is the guest's shell command for the scenario text: gzip and base64 carry it on the
// kernel command line, where the command travels.
func (g *guestScenario) command(text []byte) (string, error) {
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	zw.Write(text)
	zw.Close()
	cmd := "echo " + base64.StdEncoding.EncodeToString(z.Bytes()) + " | base64 -d | gunzip >/tmp/bench.hid && " +
		guestScenarioCommand + " /tmp/bench.hid " + g.rest
	if len(cmd) > maxGuestCommand {
		return "", fmt.Errorf("the guest's scenario takes %d bytes on the kernel command line, more than %d", len(cmd), maxGuestCommand)
	}
	return cmd, nil
}

// patch sets the guest's command to run the inner scenario at setting m, or the reference's
// command when m is one.
func (g *guestScenario) patch(m setting, o Options) error {
	text, err := g.inner.patch(m, o) // also sets the client's test, which a reference runs
	if err != nil {
		return err
	}
	var cmd string
	if m.ref != "" {
		cmd = guestReferences[m.ref].command(g, clientCommand(g.inner.clients[0].cmd))
	} else if cmd, err = g.command(text); err != nil {
		return err
	}
	g.arg.Set("value", "--run="+cmd)
	return nil
}

// guestReference is what --compare NAME runs in a guest scenario's place, in the same guest and
// kernel. Its command gets the guest scenario and the iperf client's arguments; it prints the
// markers that frame the test: irq-start and stat-start before it, irq and stat after it.
type guestReference struct {
	title   string
	command func(g *guestScenario, iperfArgs string) string
}

// guestReferences are the references of a guest scenario.
var guestReferences = map[string]guestReference{
	// Like for like: Linux in the three components' places (scripts/guest-linux-router.sh).
	"linux": {"Linux's e1000e, the kernel's forwarding and NAT", func(g *guestScenario, iperfArgs string) string {
		return "guest-linux-router " + strings.Join(g.linux, " ") + " " + iperfArgs
	}},
}

// guestFigures is what the guest printed about one run.
type guestFigures struct {
	seconds float64 // between the test's two ends, from the guest's CPU times
	cpu     float64 // the whole guest's busy time, in percent of one vCPU
	// status: the guest's supervisor at the two ends (nil for a reference)
	status *[2]supervisor.Status
	irqs   float64 // a reference's: the NIC's interrupts over the test
}

// readGuest takes the guest's figures from its console (or a log that carries it).
func readGuest(console string, cpus int) (guestFigures, error) {
	var g guestFigures
	marker := func(what string) (string, error) {
		if v, ok := qemu.FindMarker(console, what); ok {
			return v, nil
		}
		return "", fmt.Errorf("the guest printed no %s%s", qemu.Marker, what)
	}
	var stat [2]string
	for i, what := range []string{"stat-start", "stat"} {
		var err error
		if stat[i], err = marker(what); err != nil {
			return g, err
		}
	}
	busy0, all0, err := cpuTicks(stat[0])
	if err != nil {
		return g, err
	}
	busy1, all1, err := cpuTicks(stat[1])
	if err != nil {
		return g, err
	}
	if all1 <= all0 {
		return g, errors.New("the guest's CPU times did not advance over the test")
	}
	const userHZ = 100 // /proc/stat's clock ticks per second
	g.seconds = (all1 - all0) / userHZ / float64(cpus)
	g.cpu = (busy1 - busy0) / (all1 - all0) * float64(cpus) * 100
	if _, ok := qemu.FindMarker(console, "status-start"); ok {
		g.status = new([2]supervisor.Status)
		for i, what := range []string{"status-start", "status"} {
			v, err := marker(what)
			if err == nil {
				err = json.Unmarshal([]byte(v), &g.status[i])
			}
			if err != nil {
				return g, fmt.Errorf("the guest's %s: %v", what, err)
			}
		}
		return g, nil
	}
	var irq [2]float64
	for i, what := range []string{"irq-start", "irq"} {
		v, err := marker(what)
		if err == nil {
			irq[i], err = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
		if err != nil {
			return g, fmt.Errorf("the guest's %s: %v", what, err)
		}
	}
	g.irqs = irq[1] - irq[0]
	return g, nil
}

// cpuTicks reads /proc/stat's first line: the clock ticks the CPUs were busy, and all.
func cpuTicks(line string) (busy, all float64, err error) {
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("not /proc/stat's cpu line: %q", line)
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat's cpu line %q: %v", line, err)
		}
		all += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, all, nil
}

// fill puts the guest's figures into p, whose CPU so far holds the host's components: of them
// only QEMU's (the guest start's) stays, as "qemu"; the guest's components and the whole guest
// ("guest", all its vCPUs in percent of one) join it.
func (g guestFigures) fill(p *point, start string) {
	qemuCPU, ok := p.CPU[start]
	p.CPU = map[string]float64{"guest": g.cpu}
	if ok {
		p.CPU["qemu"] = qemuCPU
	}
	p.Seconds = g.seconds
	// The host's sessions carry the far end's side only: the NIC's and sessions' figures are
	// the guest's or none.
	p.IrqsPerS, p.TxIrqsPerK, p.DoorbellsPerK, p.SignalsPerK = 0, 0, 0, 0
	if g.status == nil {
		p.IrqsPerS = g.irqs / g.seconds
		return
	}
	// A PCI device counts nothing for us: the NIC's events are those the driver counts.
	a := counterDeltas{fromDriver: true}
	t0 := time.Now()
	a.add(sample{at: t0, status: g.status[0]}, sample{at: t0.Add(time.Duration(g.seconds * float64(time.Second))), status: g.status[1]})
	var inner point
	inner.CPU = p.CPU
	a.fill(&inner)
	p.IrqsPerS, p.DoorbellsPerK, p.SignalsPerK = inner.IrqsPerS, inner.DoorbellsPerK, inner.SignalsPerK
}

// consoleMarkers keeps the marker lines of the logs written to it (the guest's console).
type consoleMarkers struct {
	mu    sync.Mutex
	part  []byte // a line not yet ended
	lines strings.Builder
}

func (c *consoleMarkers) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.part = append(c.part, b...)
	for {
		i := bytes.IndexByte(c.part, '\n')
		if i < 0 {
			break
		}
		if bytes.Contains(c.part[:i], []byte(qemu.Marker)) {
			c.lines.Write(c.part[:i+1])
		}
		c.part = c.part[i+1:]
	}
	return len(b), nil
}

func (c *consoleMarkers) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines.String()
}

// waitGuest waits for the guest's last marker (stat) after its test, and reads its figures.
func waitGuest(console *consoleMarkers, cpus int) (guestFigures, error) {
	bench.WaitFor(60*time.Second, func() bool {
		_, ok := qemu.FindMarker(console.String(), "stat")
		return ok
	})
	return readGuest(console.String(), cpus)
}
