package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/iperf"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// iperfPoint is one point of the matrix, as printed and written by --json. The driver's
// settings are null when the scenario has no ipxe_nic.
type iperfPoint struct {
	RxIrqThrottle *int               `json:"rx_irq_throttle"`
	TxBatch       *bool              `json:"tx_batch"`
	Mbps          float64            `json:"mbps"` // receiver side, as iperf reports it
	CPU           map[string]float64 `json:"cpu"`  // percent of one CPU per component, while traffic flowed
	IrqsPerS      float64            `json:"irqs_per_s"`
	TxIrqs        uint64             `json:"tx_irqs"`
	DoorbellsPerK float64            `json:"doorbells_per_kframe"`
	SignalsPerK   float64            `json:"signals_per_kframe"`
	Retransmits   uint64             `json:"retransmits"` // TCP segments the senders sent again
	Seconds       float64            `json:"seconds"`     // measured traffic time
	Error         string             `json:"error,omitempty"`
}

// The components the bench recognizes by their binary.
const (
	driverBinary   = "ipxe_nic"
	hardwareBinary = "intel_nic_hw"
	routerBinary   = "nic_router"
)

// linuxDrivers are the drivers of Linux interfaces, shown in the driver's column; only the
// ipxe_nic's config is patched.
var linuxDrivers = map[string]bool{"linux_nic": true, "packet_nic": true}

type iperfBenchOptions struct {
	throttles []int
	batches   []string
	duration  time.Duration
	reverse   bool
	jsonFile  string
	plotFile  string
	compare   []string
	bins      []string
	verbose   bool
}

func init() {
	var o iperfBenchOptions
	var binDir string
	cmd := &cobra.Command{
		Use:   "iperf SCENARIO",
		Short: "Run an iperf scenario once per driver setting: throughput against each component's CPU",
		Long: "iperf runs SCENARIO once per point of the matrix --rx-irq-throttle x --tx-batch, patching the\n" +
			"<config> of its ipxe_nic driver, and the iperf test of its guests (the <config iperf=\"-c ...\"> of a\n" +
			"vm) to --time and --reverse. For each point it reports the guests' iperf result, the CPU load of\n" +
			"every component while traffic flowed (from /proc; the emulated hardware is its own component),\n" +
			"the emulated NIC's interrupts and doorbells and the packet streams' signals per 1000 frames.\n" +
			"--compare kernel (root) measures the same topology with Linux forwarding between namespaces,\n" +
			"--compare pasta with pasta, in the same invocation, and prints the ratios. Each runs with its\n" +
			"defaults: the kernel's veths at MTU 1500 with their offloads, pasta's TAP at its MTU 65520;\n" +
			"NAME@MTU sets a reference's MTU (kernel@65000,pasta@1500), to compare like with like.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o.bins = supervisor.BinDirs(binDir)
			return benchIperf(ctx, cmd.OutOrStdout(), args[0], o)
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.throttles, "rx-irq-throttle", []int{0, 651, 5580}, "the driver's rx_irq_throttle values (ITR, 256 ns units)")
	f.StringSliceVar(&o.batches, "tx-batch", []string{"no", "yes"}, "the driver's tx_batch values")
	f.DurationVar(&o.duration, "time", 10*time.Second, "iperf test time per point")
	f.BoolVar(&o.reverse, "reverse", true, "the far end sends to the guest (iperf3 -R)")
	f.StringVar(&o.jsonFile, "json", "", "also write the points to this file as JSON")
	f.StringVar(&o.plotFile, "plot", "", "draw throughput and CPU against the throttle value into this PNG")
	f.StringSliceVar(&o.compare, "compare", nil, "also measure the reference paths: kernel, pasta, NAME@MTU")
	f.StringVar(&binDir, "bin", "", "folder with component binaries, searched first")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "show the components' logs")
	benchCmd.AddCommand(cmd)
}

func benchIperf(ctx context.Context, out io.Writer, path string, o iperfBenchOptions) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if errs := supervisor.Check(path, data, o.bins, components.Table); len(errs) > 0 {
		return errors.Join(errs...)
	}
	sc, err := loadIperfScenario(path)
	if err != nil {
		return err
	}
	var refs []reference
	for _, c := range o.compare {
		r, err := parseReference(c)
		if err != nil {
			return err
		}
		refs = append(refs, r)
	}
	batches := make([]bool, len(o.batches))
	for i, b := range o.batches {
		switch b {
		case "yes", "true":
			batches[i] = true
		case "no", "false":
		default:
			return fmt.Errorf("--tx-batch %q: expected yes or no", b)
		}
	}
	type setting struct {
		itr   *int
		batch *bool
	}
	var matrix []setting
	if sc.driver == nil {
		fmt.Fprintf(out, "%s has no %s: one run, the driver matrix does not apply\n", path, driverBinary)
		matrix = []setting{{}}
	} else {
		for i := range o.throttles {
			for j := range batches {
				matrix = append(matrix, setting{&o.throttles[i], &batches[j]})
			}
		}
	}
	printLoad(out)
	// The bar redraws with carriage returns: only for a terminal; a log or pipe gets a line
	// per point instead.
	_, err = unix.IoctlGetTermios(int(os.Stderr.Fd()), unix.TCGETS)
	tty := err == nil
	bar := progressbar.NewOptions(len(matrix)*int(o.duration.Seconds()+1),
		progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("bench iperf"),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionSetVisibility(tty))
	var points []iperfPoint
	for i, m := range matrix {
		text, err := sc.patch(m.itr, m.batch, o.duration, o.reverse)
		if err != nil {
			return err
		}
		if m.itr != nil {
			desc := fmt.Sprintf("rx_irq_throttle=%d tx_batch=%v", *m.itr, *m.batch)
			bar.Describe(desc)
			if !tty {
				fmt.Fprintf(os.Stderr, "bench iperf: point %d of %d: %s\n", i+1, len(matrix), desc)
			}
		}
		p, err := measureIperf(ctx, text, sc, o, bar)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			p.Error = err.Error()
			fmt.Fprintf(os.Stderr, "\npoint failed: %v\n", err)
		}
		p.RxIrqThrottle, p.TxBatch = m.itr, m.batch
		points = append(points, p)
	}
	bar.Finish()
	writeIperfTable(out, points, sc)
	for _, r := range refs {
		mbps, err := referenceIperf(ctx, r, o.duration, o.reverse)
		if err != nil {
			fmt.Fprintf(out, "--compare %s: %v\n", r, err)
			continue
		}
		writeIperfComparison(out, points, r, mbps)
	}
	printLoad(out)
	if o.jsonFile != "" {
		if err := writeJSON(o.jsonFile, points); err != nil {
			return err
		}
	}
	if o.plotFile != "" {
		if err := plotIperf(o.plotFile, points); err != nil {
			return err
		}
	}
	for _, p := range points {
		if p.Error != "" {
			return errors.New("some points failed (see the table)")
		}
	}
	return nil
}

// iperfScenario is the parsed scenario with the nodes the bench patches and reads.
type iperfScenario struct {
	root    *config.Node
	driver  *config.Node      // the ipxe_nic's <config>, nil without one
	roles   map[string]string // binary -> start name, for the table's columns
	clients []*iperfClient
}

// iperfClient is a guest that measures: an embedded one runs the test itself and reports it in
// its counters; for a netns one the bench runs the real iperf3 in the guest's namespace.
type iperfClient struct {
	name  string       // the start's
	cfg   *config.Node // its <config>, with iperf="-c ..."
	netns string       // the netns guest's namespace, "" for an embedded guest
	cmd   *iperf.Command
}

func startBinary(st *config.Node) string {
	if b := st.Sub("binary"); b != nil {
		return b.Name()
	}
	return st.Name()
}

func loadIperfScenario(path string) (*iperfScenario, error) {
	root, err := config.ParseFile(path)
	if err != nil {
		return nil, err
	}
	sc := &iperfScenario{root: root, roles: map[string]string{}}
	for _, st := range root.Subs("start") {
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
			if !cmd.Server {
				c := &iperfClient{name: st.Name(), cfg: cfg, cmd: cmd}
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
	return sc, nil
}

func setAttr(n *config.Node, name, value string) {
	for i := range n.Attrs {
		if n.Attrs[i].Name == name {
			n.Attrs[i].Value = value
			return
		}
	}
	n.Attrs = append(n.Attrs, config.Attr{Name: name, Value: value})
}

// patch returns the scenario of one point as XML.
func (sc *iperfScenario) patch(itr *int, batch *bool, d time.Duration, reverse bool) ([]byte, error) {
	if sc.driver != nil {
		setAttr(sc.driver, "rx_irq_throttle", strconv.Itoa(*itr))
		// As in bench driver: without batching the driver is iPXE's (an interrupt per sent
		// descriptor), with it Genode's (queue-empty interrupts only).
		setAttr(sc.driver, "tx_batch", map[bool]string{false: "no", true: "yes"}[*batch])
		setAttr(sc.driver, "tx_irq", map[bool]string{false: "descriptor_done", true: "queue_empty"}[*batch])
	}
	for _, c := range sc.clients {
		c.cmd.Time, c.cmd.Reverse = d.Seconds(), reverse
		if c.netns == "" {
			setAttr(c.cfg, "iperf", clientCommand(c.cmd))
		} else {
			removeAttr(c.cfg, "iperf") // the bench runs it
		}
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

// clientCommand writes an iperf client command line back.
func clientCommand(c *iperf.Command) string {
	s := fmt.Sprintf("-c %s -p %d -t %g -P %d -l %d", c.Client, c.Port, c.Time, c.Parallel, c.Length)
	if c.Reverse {
		s += " -R"
	}
	return s
}

// sample is what one status tells the bench.
type sample struct {
	at       time.Time
	status   supervisor.Status
	traffic  uint64 // bytes through the clients' sessions
	finished int    // clients whose test ended
	mbps     float64
	// retransmits the embedded guests counted (a netns guest's come with its result)
	retransmits uint64
}

// read takes a status apart; results holds what the bench's own iperf3 runs measured.
func (sc *iperfScenario) read(st supervisor.Status, results map[string]float64) sample {
	sm := sample{at: time.Now(), status: st}
	for _, c := range st.Components {
		sm.retransmits += c.Counters["tcp_retransmits"] // embedded guests count them
		for _, cl := range sc.clients {
			if c.Name != cl.name {
				continue
			}
			for _, ss := range c.Sessions {
				sm.traffic += ss.Sent.Bytes + ss.Received.Bytes
			}
			if mbps, ok := results[cl.name]; ok {
				sm.finished++
				sm.mbps += mbps
			} else if cl.netns == "" && c.Counters["iperf_tests"] > 0 {
				sm.finished++
				sm.mbps += float64(c.Counters["iperf_bits_per_second"]) / 1e6
			}
		}
	}
	return sm
}

// runInNetns runs the client's test with the real iperf3 inside its guest's namespace, once
// the supervisor made it, retrying while the server is not up yet.
func runInNetns(ctx context.Context, s *supervisor.Supervisor, c *iperfClient) (mbps float64, retransmits uint64, err error) {
	var last error
	for ctx.Err() == nil {
		path, ok := s.Netns(c.netns)
		if ok {
			argv := []string{"iperf3", "-J", "-c", c.cmd.Client, "-p", strconv.Itoa(c.cmd.Port),
				"-t", strconv.Itoa(int(c.cmd.Time + 0.5)), "-P", strconv.Itoa(c.cmd.Parallel)}
			if c.cmd.Reverse {
				argv = append(argv, "-R")
			}
			var out bytes.Buffer
			cmd := supervisor.ExecIn(ctx, path, argv)
			cmd.Stdout = &out
			err := cmd.Run()
			var rep iperf.Report
			if jerr := json.Unmarshal(out.Bytes(), &rep); jerr == nil && rep.Error == "" && err == nil {
				if r := rep.End.SumSent.Retransmits; r != nil && *r > 0 {
					retransmits = uint64(*r)
				}
				return rep.End.SumReceived.BitsPerSecond / 1e6, retransmits, nil
			} else if rep.Error != "" {
				err = errors.New(rep.Error)
			} else if err == nil {
				err = jerr
			}
			last = err
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	if last == nil {
		return 0, 0, fmt.Errorf("iperf3 in namespace %s: the namespace never came up (is its component running? -v shows the logs)", c.netns)
	}
	return 0, 0, fmt.Errorf("iperf3 in namespace %s: %v", c.netns, last)
}

// activeBytes is the traffic in an interval that counts it as measured (not start-up or DHCP).
const activeBytes = 1 << 20

func measureIperf(ctx context.Context, text []byte, sc *iperfScenario, o iperfBenchOptions, bar *progressbar.ProgressBar) (iperfPoint, error) {
	p := iperfPoint{CPU: map[string]float64{}}
	runCtx, cancelRun := context.WithCancel(ctx) // also ends the iperf3s a netns guest runs
	defer cancelRun()
	s, done, stop, err := startBenchScenario(runCtx, "iperf", text, o.bins, o.verbose)
	if err != nil {
		return p, err
	}
	defer stop()

	results := map[string]float64{}
	type result struct {
		name        string
		mbps        float64
		retransmits uint64
		err         error
	}
	measured := make(chan result, len(sc.clients))
	for _, c := range sc.clients {
		if c.netns != "" {
			go func() {
				ctx, cancel := context.WithTimeout(runCtx, o.duration+60*time.Second)
				defer cancel()
				mbps, retr, err := runInNetns(ctx, s, c)
				measured <- result{c.name, mbps, retr, err}
			}()
		}
	}
	var acc counterDeltas
	deadline := time.Now().Add(o.duration + 60*time.Second)
	prev := sample{at: time.Now()}
	progress := 0
	for {
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case err := <-done:
			done <- err
			return p, fmt.Errorf("the scenario ended early: %v", err)
		case r := <-measured:
			if r.err != nil {
				return p, r.err
			}
			results[r.name] = r.mbps
			p.Retransmits += r.retransmits
		case <-time.After(500 * time.Millisecond):
		}
		st, ok := s.Status()
		if !ok {
			continue
		}
		cur := sc.read(st, results)
		if cur.traffic-prev.traffic >= activeBytes && prev.status.Components != nil {
			acc.add(prev, cur)
			if n := int(acc.seconds); n > progress {
				bar.Add(n - progress)
				progress = n
			}
		}
		prev = cur
		if cur.finished == len(sc.clients) {
			p.Mbps = cur.mbps
			p.Retransmits += cur.retransmits
			break
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("the iperf test did not finish within %v (run with -v for the logs)", o.duration+60*time.Second)
		}
	}
	bar.Add(max(0, int(o.duration.Seconds()+1)-progress))
	acc.fill(&p)
	return p, nil
}

// counterDeltas sums what changed over the intervals in which traffic flowed.
type counterDeltas struct {
	seconds     float64
	cpuSeconds  map[string]float64 // percent-seconds per component
	irqs, txIrq uint64
	doorbells   uint64
	hwFrames    uint64
	signals     uint64
	frames      uint64
}

func (a *counterDeltas) add(prev, cur sample) {
	dt := cur.at.Sub(prev.at).Seconds()
	a.seconds += dt
	if a.cpuSeconds == nil {
		a.cpuSeconds = map[string]float64{}
	}
	before := map[string]supervisor.ComponentStatus{}
	for _, c := range prev.status.Components {
		before[c.Name] = c
	}
	for _, c := range cur.status.Components {
		a.cpuSeconds[c.Name] += c.CPULoad * dt
		b := before[c.Name]
		delta := func(name string) uint64 {
			if c.Counters[name] < b.Counters[name] {
				return 0 // restarted
			}
			return c.Counters[name] - b.Counters[name]
		}
		if filepath.Base(c.Binary) == hardwareBinary {
			a.irqs += delta("interrupts")
			a.txIrq += delta("irq_txdw") + delta("irq_txqe")
			a.doorbells += delta("doorbells")
			a.hwFrames += delta("tx_frames") + delta("rx_frames")
		}
		var sig0, fr0 uint64
		for _, ss := range b.Sessions {
			sig0 += ss.Sent.SignalsSent + ss.Received.SignalsSent
			fr0 += ss.Sent.Frames
		}
		var sig1, fr1 uint64
		for _, ss := range c.Sessions {
			sig1 += ss.Sent.SignalsSent + ss.Received.SignalsSent
			fr1 += ss.Sent.Frames
		}
		if sig1 >= sig0 && fr1 >= fr0 {
			a.signals += sig1 - sig0
			a.frames += fr1 - fr0
		}
	}
}

func (a *counterDeltas) fill(p *iperfPoint) {
	p.Seconds = a.seconds
	if a.seconds == 0 {
		return
	}
	for name, cs := range a.cpuSeconds {
		p.CPU[name] = cs / a.seconds
	}
	p.IrqsPerS = float64(a.irqs) / a.seconds
	p.TxIrqs = a.txIrq
	if a.hwFrames > 0 {
		p.DoorbellsPerK = float64(a.doorbells) * 1000 / float64(a.hwFrames)
	}
	if a.frames > 0 {
		p.SignalsPerK = float64(a.signals) * 1000 / float64(a.frames)
	}
}
