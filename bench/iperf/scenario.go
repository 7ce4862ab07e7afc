package iperf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/internal/qemu"
	"github.com/nicstack/nicstack/runtime/config"
)

// scenario is the parsed scenario with the nodes the bench patches and reads.
type scenario struct {
	root    *config.Node
	driver  *config.Node      // the ipxe_nic's <config>, nil without one
	roles   map[string]string // binary -> start name, for the table's columns
	clients []*client
	servers []*config.Node // the <config>s of the guests that run an iperf server
	// rrGuest is guest B's <config> with --latency-guest separate (addLatencyGuest), nil
	// without; rrGuestName its start's name.
	rrGuest     *config.Node
	rrGuestName string
	mq          *vhostQueues // what --queues patches (queues.go), nil without
	// places are the --affinity values, affinities the starts they move (placement.go).
	places     []placement
	affinities map[string]startAffinity
}

// client is a guest that measures: an embedded one runs the test itself and reports it in
// its counters; for a netns one the bench runs the real iperf3 in the guest's namespace; a
// QEMU guest (the program `nicstack guest --iperf=...`) runs it in the VM, and its far end's
// server counts it.
type client struct {
	name  string       // the start's
	start *config.Node // the <start>
	cfg   *config.Node // its <config>, with iperf="-c ..."
	netns string       // the netns guest's namespace, "" for an embedded guest
	cmd   *iperf.Command
	// target4 and target6 are the far end's addresses of each IP version when --ip has 6
	// (findTargets6); empty otherwise, and the test goes to cmd's as written.
	target4, target6 string
	vmArg            *config.Node   // a QEMU guest's <arg value="--iperf=..."/>
	guest            *guestScenario // a QEMU guest that runs a scenario with the client inside
	// server is the start whose iperf server a QEMU guest's test reaches (its counters, and
	// traffic through its sessions, stand for the guest's).
	server string
}

// counted is the start whose sessions and counters show the client's test.
func (c *client) counted() string {
	if c.server != "" {
		return c.server
	}
	return c.name
}

// prepareGuests builds the QEMU guests' image once, before any run: the guest programs of
// every run take it from the environment (qemu.ImageEnv) instead of checking it each. A guest
// scenario's image has Debian's generic kernel with Linux's e1000e, whether or not --compare
// runs it: the matrix's figures do not depend on what it is compared with.
func (sc *scenario) prepareGuests(ctx context.Context) error {
	for _, c := range sc.clients {
		if c.vmArg == nil && c.guest == nil {
			continue
		}
		im, err := qemu.BuildImage(ctx)
		if c.guest != nil {
			im, err = qemu.BuildScenarioImage(ctx, true)
		}
		if err != nil {
			return err
		}
		return os.Setenv(qemu.ImageEnv, filepath.Dir(im.Kernel))
	}
	return nil
}

// qemuIperf is the argument of `nicstack guest` that names the guest's iperf client.
const qemuIperf = "--iperf="

// qemuClient is the <arg> of a QEMU guest program's iperf, if st is one.
func qemuClient(st *config.Node) *config.Node {
	cfg := st.Sub("config")
	if startBinary(st) != "nicstack" || cfg == nil {
		return nil
	}
	for _, a := range cfg.Subs("arg") {
		if strings.HasPrefix(a.String("value", ""), qemuIperf) {
			return a
		}
	}
	return nil
}

// inGuest says whether the scenario runs inside a QEMU guest.
func (sc *scenario) inGuest() bool {
	for _, c := range sc.clients {
		if c.guest != nil {
			return true
		}
	}
	return false
}

func startBinary(st *config.Node) string {
	if b := st.Sub("binary"); b != nil {
		return b.Name()
	}
	return st.Name()
}

func loadScenario(path string) (*scenario, error) {
	root, err := config.ParseFile(path)
	if err != nil {
		return nil, err
	}
	sc := &scenario{root: root, roles: map[string]string{}}
	var servers []string
	for _, st := range root.Subs("start") {
		g, err := guestScenarioOf(st, filepath.Dir(path))
		if err != nil {
			return nil, err
		}
		if g != nil {
			sc.clients = append(sc.clients, &client{name: st.Name(), guest: g})
			// The driver's settings and the table's columns are the guest's scenario's.
			sc.driver, sc.roles = g.inner.driver, g.inner.roles
			continue
		}
		if a := qemuClient(st); a != nil {
			v := strings.TrimPrefix(a.String("value", ""), qemuIperf)
			cmd, err := iperf.ParseCommand(strings.Fields(v))
			if err != nil || cmd.Server {
				return nil, config.Errorf(a.Pos, "%s%s: want an iperf client (%v)", qemuIperf, v, err)
			}
			sc.clients = append(sc.clients, &client{name: st.Name(), cmd: cmd, vmArg: a})
			continue
		}
		role := startBinary(st)
		if linuxDrivers[role] {
			role = driverBinary // the driver's column
		}
		sc.roles[role] = st.Name()
		cfg := st.Sub("config")
		if startBinary(st) == driverBinary {
			if cfg == nil {
				cfg = &config.Node{Type: "config", Pos: st.Pos}
				st.Nodes = append(st.Nodes, cfg)
			}
			sc.driver = cfg
		}
		if cfg == nil {
			continue
		}
		if a, ok := cfg.Attr("iperf"); ok {
			cmd, err := iperf.ParseCommand(strings.Fields(a.Value))
			if err != nil {
				return nil, config.Errorf(a.Pos, "%v", err)
			}
			if cmd.Server {
				sc.servers = append(sc.servers, cfg)
				servers = append(servers, st.Name())
			} else {
				c := &client{name: st.Name(), start: st, cfg: cfg, cmd: cmd}
				if cfg.String("guest", "embedded") == "netns" {
					c.netns = cfg.String("netns", st.Name())
				}
				sc.clients = append(sc.clients, c)
			}
		}
	}
	if len(sc.clients) == 0 {
		return nil, fmt.Errorf("%s: no guest runs an iperf client (<config iperf=\"-c HOST ...\"/>)", path)
	}
	for _, c := range sc.clients {
		if c.vmArg != nil || c.guest != nil {
			if len(servers) != 1 {
				return nil, fmt.Errorf("%s: a QEMU guest's test is counted by its far end: want one iperf server, found %d", path, len(servers))
			}
			c.server = servers[0]
		}
	}
	return sc, nil
}

// patch returns the scenario of one run at setting m as XML: the driver's settings, the
// clients' test (time, direction, --rate, --udp-rate), and with --latency their rr clients
// and the servers' rr.
func (sc *scenario) patch(m setting, o Options) ([]byte, error) {
	d, latency := o.Time, o.Latency
	if sc.driver != nil && m.itr != nil {
		sc.driver.Set("rx_irq_throttle", string(*m.itr))
		// As in bench driver: without batching the driver is iPXE's (an interrupt per sent
		// descriptor), with it Genode's (queue-empty interrupts only).
		sc.driver.Set("tx_batch", yesNo(*m.batch))
		sc.driver.Set("tx_irq", map[bool]string{false: "descriptor_done", true: "queue_empty"}[*m.batch])
	}
	sc.patchFQCodel(m.fq)
	sc.patchBQLLimitMax(m.cap)
	sc.resetPlacement()
	if sc.mq != nil && m.pairs > 0 {
		sc.mq.patch(m.pairs)
	}
	sc.patchPlacement(m.place, sc.places)
	for _, c := range sc.clients {
		if c.guest != nil {
			if err := c.guest.patch(m, o); err != nil {
				return nil, err
			}
			continue
		}
		c.setFamily(m.ip)
		c.cmd.Time, c.cmd.Omit = d.Seconds(), int(o.Omit/time.Second)
		c.cmd.Reverse, c.cmd.Bidir = m.dir == dirRX, m.dir == dirBidir
		if m.flows > 0 {
			c.cmd.Parallel = m.flows
		}
		if m.rate != "" {
			var err error
			if c.cmd.Rate, c.cmd.Burst, err = iperf.ParseRate(m.rate); err != nil {
				return nil, fmt.Errorf("--rate %q: %v", m.rate, err)
			}
		}
		c.cmd.UDP = o.UDPRate > 0
		if c.cmd.UDP {
			c.cmd.Rate, c.cmd.Length = uint64(o.UDPRate)*udpPayload*8, udpPayload
		}
		if c.vmArg != nil {
			c.vmArg.Set("value", qemuIperf+clientCommand(c.cmd))
		} else if c.netns == "" {
			c.cfg.Set("iperf", clientCommand(c.cmd))
			if latency && sc.rrGuest == nil {
				c.cfg.Set("rr", rrCommand(c.cmd.Client))
			}
		} else {
			removeAttr(c.cfg, "iperf") // the bench runs it
		}
	}
	for _, cfg := range sc.servers {
		if latency {
			cfg.Set("rr", "-s")
		}
	}
	if latency && sc.rrGuest != nil {
		sc.rrGuest.Set("rr", rrCommand(sc.clients[0].cmd.Client))
		sc.rrGuest.Set("rr_load_sec", strconv.Itoa(max(1, int(o.Time.Seconds()+0.5))))
		sc.rrGuest.Set("rr_load_omit_sec", strconv.Itoa(int(o.Omit/time.Second)))
	}
	return sc.root.XML(), nil
}

func removeAttr(n *config.Node, name string) {
	for i := range n.Attrs {
		if n.Attrs[i].Name == name {
			n.Attrs = append(n.Attrs[:i], n.Attrs[i+1:]...)
			return
		}
	}
}

// udpPayload is the datagram size of --udp-rate's stream: small frames (106 bytes on the
// wire), so that the frame rate, not the bytes, is the load.
const udpPayload = 64

// clientCommand writes an iperf client command line back.
func clientCommand(c *iperf.Command) string {
	s := fmt.Sprintf("-c %s -p %d -t %g -P %d -l %d", c.Client, c.Port, c.Time, c.Parallel, c.Length)
	if c.Omit > 0 {
		s += fmt.Sprintf(" -O %d", c.Omit)
	}
	if c.UDP {
		s += " -u"
	}
	if b := rateArg(c); b != "" {
		s += " -b " + b
	}
	if c.Version6 {
		s += " -6"
	}
	return strings.Join(append([]string{s}, directionArgs(c)...), " ")
}

// rateArg is a client's -b, "" when its TCP flows are unpaced: bits per second, and /N for
// bursts of N blocks.
func rateArg(c *iperf.Command) string {
	if c.Rate == 0 && !c.UDP {
		return ""
	}
	b := strconv.FormatUint(c.Rate, 10)
	if c.Burst > 0 {
		b += "/" + strconv.Itoa(c.Burst)
	}
	return b
}

// directionArgs are the iperf3 options of a client's direction.
func directionArgs(c *iperf.Command) []string {
	switch {
	case c.Bidir:
		return []string{"--bidir"}
	case c.Reverse:
		return []string{"-R"}
	}
	return nil
}

// bothWays is a client's result in Mbit/s as the receivers counted it: of a bidirectional
// test both directions together.
// endsCPU is the CPU time of both iperf3s over the test, in percent of one CPU, as they
// report it: their own and the kernel's work in their context (Linux's forwarding between
// namespaces runs in the sender's), 0 when the report has none.
func endsCPU(rep *iperf.Report) float64 {
	if c := rep.End.CPU; c != nil {
		return c.HostTotal + c.RemoteTotal
	}
	return 0
}

func bothWays(rep *iperf.Report) float64 {
	bps := rep.Received().BitsPerSecond
	if rev := rep.End.SumReceivedBidirReverse; rev != nil {
		bps += rev.BitsPerSecond
	}
	return bps / 1e6
}
