package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/runtime/supervisor"
)

// driverPoint is one driver setting, as printed and written by --json.
type driverPoint struct {
	RxIrqThrottle      int     `json:"rx_irq_throttle"`
	TxBatch            bool    `json:"tx_batch"`
	IrqsPerS           float64 `json:"irqs_per_s"`
	IrqsPerKframe      float64 `json:"irqs_per_kframe"`
	TxIrqs             uint64  `json:"tx_irqs"` // TXDW and TXQE interrupts in the window
	DoorbellsPerKframe float64 `json:"doorbells_per_kframe"`
	DriverCPU          float64 `json:"driver_cpu"` // percent of one CPU
	HwCPU              float64 `json:"hw_cpu"`     // the model's, standing for hardware
	// DriverUsPerFrame is driver CPU per frame carried (both ways): the cost independent of the
	// throughput a loaded machine lets through.
	DriverUsPerFrame float64 `json:"driver_us_per_frame"`
	Mbps             float64 `json:"mbps"` // both directions
	// LinePct is Mbps against line rate both ways: 1514-byte frames of 1538 bytes on the wire
	// (preamble, FCS and gap included) carry 984.4 Mbit/s of frame bytes each way at 1 Gbit/s.
	LinePct float64 `json:"line_pct"`
	// RxOverruns are frames from the wire the device dropped for want of a free RX
	// descriptor: the driver came back to its ring too late.
	RxOverruns uint64  `json:"rx_overruns"`
	TxMbps     float64 `json:"tx_mbps"` // router side to the wire
	RxMbps     float64 `json:"rx_mbps"` // wire to the router side
	Seconds    float64 `json:"seconds"`
}

func init() {
	var (
		o        driverBenchOptions
		jsonFile string
		binDir   string
	)
	cmd := &cobra.Command{
		Use:   "driver",
		Short: "ipxe_nic against the emulated NIC at 1 Gbit/s line rate both ways, per rx_irq_throttle and tx_batch",
		Long: "driver runs ipxe_nic (CPU 0) and intel_nic_hw (an 82574L at 1 Gbit/s, CPU 1) as separate pinned\n" +
			"processes with a device session between them. A nic_perf serving the driver's Uplink session\n" +
			"sends 1514-byte frames as fast as the driver takes them; a nic_perf at the far end of the cable\n" +
			"sends as fast as the wire carries them. Both nic_perfs run on CPU 1 without spinning, so that\n" +
			"the driver has CPU 0 to itself as in Genode's measurement (router on another CPU).\n" +
			"Per point (rx_irq_throttle 0, 651, 5580 x tx_batch no, yes; tx_batch=no uses descriptor_done TX\n" +
			"interrupts as iPXE does, yes queue_empty) it reports the model's interrupts, TX interrupts and\n" +
			"TX doorbells, each process's CPU from /proc/PID/stat, the frames carried against line rate, and\n" +
			"the frames the device dropped for want of a free RX descriptor.\n\n" +
			"With rx_irq_throttle 0 the model raises an interrupt for the first cause after the driver has\n" +
			"read ICR, as the hardware does; causes before that ride on the outstanding interrupt (counter\n" +
			"irq_causes_while_asserted, -v). So interrupts per frame there measure the driver's round trip\n" +
			"(eventfd wakeup, handler, ICR read), which on a 2-core VM is several frame times.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.bins = supervisor.BinDirs(binDir)
			return benchDriver(cmd.Context(), cmd.OutOrStdout(), o, jsonFile)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.d, "time", 10*time.Second, "measuring time per point and run")
	f.IntVar(&o.runs, "runs", 1, "consecutive windows per point; the one of median throughput is reported")
	f.IntSliceVar(&o.itrs, "rx-irq-throttle", []int{0, 651, 5580}, "the rx_irq_throttle values to measure")
	f.StringSliceVar(&o.batches, "tx-batch", []string{"no", "yes"}, "the tx_batch values to measure (no, yes)")
	f.DurationVar(&o.spin, "spin", 2*time.Millisecond, "the model spins for waits shorter than this (frames arrive one by one, ITR is kept to the µs); its CPU stands for hardware")
	f.StringVar(&jsonFile, "json", "", "also write the results to this file as JSON")
	f.StringVar(&binDir, "bin", "", "folder with component binaries, searched first")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "show the components' logs")
	benchCmd.AddCommand(cmd)
}

// driverBenchOptions are the flags of one run.
type driverBenchOptions struct {
	d, spin time.Duration
	runs    int
	itrs    []int
	batches []string
	bins    []string
	verbose bool
}

func benchDriver(ctx context.Context, out io.Writer, o driverBenchOptions, jsonFile string) error {
	if o.runs < 1 {
		return fmt.Errorf("--runs %d: want at least 1", o.runs)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	printLoad(out)
	if o.itrs == nil {
		o.itrs = []int{0, 651, 5580}
	}
	if o.batches == nil {
		o.batches = []string{"no", "yes"}
	}
	var batches []bool
	for _, b := range o.batches {
		switch b {
		case "no":
			batches = append(batches, false)
		case "yes":
			batches = append(batches, true)
		default:
			return fmt.Errorf("--tx-batch %q: want no or yes", b)
		}
	}
	for _, itr := range o.itrs {
		if itr < 0 || itr > 0xffff {
			return fmt.Errorf("--rx-irq-throttle %d: want 0..65535", itr)
		}
	}
	var points []driverPoint
	for _, batch := range batches {
		for _, itr := range o.itrs {
			p, err := measureDriver(ctx, itr, batch, o)
			if err != nil {
				return fmt.Errorf("rx_irq_throttle=%d tx_batch=%v: %w", itr, batch, err)
			}
			fmt.Fprintf(out, "rx_irq_throttle=%-5d tx_batch=%-5v %8.0f irqs/s  driver CPU %5.1f%%  %6.0f Mbit/s\n",
				itr, batch, p.IrqsPerS, p.DriverCPU, p.Mbps)
			points = append(points, p)
		}
	}
	fmt.Fprintf(out, "\n%v per point (median of %d); 1514-byte frames both ways at 1 Gbit/s line rate (%.1f Mbit/s of frames each way); model spin %v:\n", o.d, o.runs, lineMbps, o.spin)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rx_irq_throttle\ttx_batch\tirqs/s\tirqs/kframe\tTX irqs\tTX doorbells/kframe\tdriver CPU %\tdriver µs/frame\tmodel CPU %\tTX Mbit/s\tRX Mbit/s\tMbit/s\tline %\tRX overruns\t")
	for _, p := range points {
		fmt.Fprintf(tw, "%d\t%v\t%.0f\t%.1f\t%d\t%.1f\t%.1f\t%.2f\t%.1f\t%.0f\t%.0f\t%.0f\t%.1f\t%d\t\n", p.RxIrqThrottle, p.TxBatch,
			p.IrqsPerS, p.IrqsPerKframe, p.TxIrqs, p.DoorbellsPerKframe, p.DriverCPU, p.DriverUsPerFrame, p.HwCPU, p.TxMbps, p.RxMbps, p.Mbps, p.LinePct, p.RxOverruns)
	}
	tw.Flush()
	printLoad(out)
	if jsonFile != "" {
		return writeJSON(jsonFile, points)
	}
	return nil
}

// lineMbps is the frame bytes a 1 Gbit/s link carries each way with 1514-byte frames, each
// 1538 bytes on the wire with preamble, FCS and inter-frame gap.
const lineMbps = 1000.0 * 1514 / 1538

// measureDriver runs one point's scenario and measures a window of d after a warm-up.
func measureDriver(ctx context.Context, itr int, batch bool, o driverBenchOptions) (driverPoint, error) {
	p := driverPoint{RxIrqThrottle: itr, TxBatch: batch}
	s, _, stop, err := startBenchScenario(ctx, "driver", []byte(DriverBenchScenario(itr, batch, o.spin)), o.bins, o.verbose)
	if err != nil {
		return p, err
	}
	defer stop()

	type snap struct {
		at               time.Time
		hw, drv, up, far map[string]uint64
		drvCPU, hwCPU    float64
	}
	take := func() (sn snap, ok bool) {
		st, alive := s.Status()
		if !alive {
			return sn, false
		}
		sn.at = time.Now()
		for _, c := range st.Components {
			switch c.Name {
			case "intel_nic_hw":
				sn.hw, sn.hwCPU = c.Counters, c.CPULoad
			case "ipxe_nic":
				sn.drv, sn.drvCPU = c.Counters, c.CPULoad
			case "uplink":
				sn.up = c.Counters
			case "far_end":
				sn.far = c.Counters
			}
		}
		return sn, sn.hw != nil && sn.drv != nil && sn.up != nil && sn.far != nil
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if sn, ok := take(); ok && sn.up["rx_frames"] > 0 && sn.far["rx_frames"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("no frames both ways within 20 s (run with -v for the logs)")
		}
	}
	time.Sleep(500 * time.Millisecond) // warm-up: rings full, rates settled
	s0, ok := take()                   // also starts the CPU window of each process
	if !ok {
		return p, fmt.Errorf("the scenario ended during the warm-up (run with -v for the logs)")
	}
	var windows []driverPoint
	for range o.runs {
		select {
		case <-time.After(o.d):
		case <-ctx.Done():
			return p, ctx.Err()
		}
		s1, ok := take()
		if !ok {
			return p, fmt.Errorf("the scenario ended")
		}
		delta := func(a, b map[string]uint64, name string) uint64 { return b[name] - a[name] }
		w := p
		secs := s1.at.Sub(s0.at).Seconds()
		irqs := delta(s0.hw, s1.hw, "interrupts")
		tx, rx := delta(s0.hw, s1.hw, "tx_frames"), delta(s0.hw, s1.hw, "rx_frames")
		w.Seconds = secs
		w.IrqsPerS = float64(irqs) / secs
		w.IrqsPerKframe = float64(irqs) * 1000 / float64(max(tx+rx, 1))
		w.TxIrqs = delta(s0.hw, s1.hw, "irq_txdw") + delta(s0.hw, s1.hw, "irq_txqe")
		w.DoorbellsPerKframe = float64(delta(s0.hw, s1.hw, "tdt_writes")) * 1000 / float64(max(tx, 1))
		w.DriverCPU, w.HwCPU = s1.drvCPU, s1.hwCPU
		w.DriverUsPerFrame = w.DriverCPU / 100 * secs * 1e6 / float64(max(tx+rx, 1))
		w.TxMbps = float64(delta(s0.hw, s1.hw, "tx_bytes")) * 8 / secs / 1e6
		w.RxMbps = float64(delta(s0.up, s1.up, "rx_bytes")) * 8 / secs / 1e6
		w.Mbps = w.TxMbps + w.RxMbps
		w.LinePct = 100 * w.Mbps / (2 * lineMbps)
		w.RxOverruns = delta(s0.hw, s1.hw, "rx_no_descriptor")
		if o.verbose {
			d := func(a, b map[string]uint64) map[string]uint64 {
				m := map[string]uint64{}
				for k, v := range b {
					if v != a[k] {
						m[k] = v - a[k]
					}
				}
				return m
			}
			fmt.Fprintf(os.Stderr, "window: %+v\nmodel %v\ndriver %v\nuplink %v\nfar end %v\n", w,
				d(s0.hw, s1.hw), d(s0.drv, s1.drv), d(s0.up, s1.up), d(s0.far, s1.far))
		}
		windows = append(windows, w)
		s0 = s1
	}
	// the window of median throughput, whole: on a shared machine the others' load moves
	// throughput and CPU together, so mixing medians of separate windows would pair them wrongly
	sort.Slice(windows, func(i, j int) bool { return windows[i].Mbps < windows[j].Mbps })
	return windows[len(windows)/2], nil
}

// DriverBenchScenario is the scenario of one bench point: the driver alone on CPU 0; the model,
// the far end's generator and the generator serving the driver's Uplink session on CPU 1. The
// generators wait without spinning (spin="0"): spinning beside the model on one CPU starved it
// and held the wire at ~80 % of line rate.
func DriverBenchScenario(itr int, batch bool, spin time.Duration) string {
	txBatch, txIrq := "no", "descriptor_done"
	if batch {
		txBatch, txIrq = "yes", "queue_empty"
	}
	return fmt.Sprintf(`<config>
	<parent-provides> <service name="LOG"/> </parent-provides>
	<default-route> <any-service> <parent/> <any-child/> </any-service> </default-route>
	<default caps="100" ram="64M"/>
	<affinity-space width="2" height="1"/>
	<start name="intel_nic_hw"> <affinity xpos="1" ypos="0"/>
		<provides> <service name="Platform"/> <service name="Nic"/> </provides>
		<config model="82574L" mac="02:00:00:00:00:42" partner_speed="1000" spin_us="%d"/>
	</start>
	<start name="ipxe_nic"> <affinity xpos="0" ypos="0"/>
		<config rx_irq_throttle="%d" tx_batch="%s" tx_irq="%s" phy_reset="auto"/>
	</start>
	<start name="uplink"> <binary name="nic_perf"/> <affinity xpos="1" ypos="0"/>
		<provides> <service name="Uplink"/> </provides>
		<config service="Uplink" tx="yes" ip="198.18.0.1" dst_ip="198.18.0.2" dst_mac="02:00:00:00:00:99" size="1514" period_ms="0" spin="0"/>
	</start>
	<start name="far_end"> <binary name="nic_perf"/> <affinity xpos="1" ypos="0"/>
		<config tx="yes" ip="198.18.0.2" mac="02:00:00:00:00:99" dst_ip="198.18.0.1" dst_mac="02:00:00:00:00:42" size="1514" period_ms="0" spin="0"/>
	</start>
</config>
`, spin.Microseconds(), itr, txBatch, txIrq)
}
