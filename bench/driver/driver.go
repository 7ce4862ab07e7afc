// Package driver measures the ipxe driver against the emulated Intel NIC at 1 Gbit/s line rate
// both ways: interrupts, doorbells, CPU and throughput per rx_irq_throttle and tx_batch. It is
// the harness of `nicstack bench driver`, not the driver (drivers/ipxe) or the model.
package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/nicstack/nicstack/bench"
)

// point is one driver setting, as printed and written by --json.
type point struct {
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

// Options are one invocation's settings.
type Options struct {
	Time time.Duration // measuring time per point and run
	// Spin: the model spins for waits shorter than this; its CPU stands for hardware.
	Spin      time.Duration
	Runs      int      // windows per point; the one of median throughput is reported
	Throttles []int    // the rx_irq_throttle values (nil: 0, 651, 5580)
	Batches   []string // the tx_batch values, no or yes (nil: both)
	JSON      string   // also write the points to this file
	// Verbose also prints each window's counters.
	bench.Components
}

// Run measures every point (tx_batch x rx_irq_throttle), printing each, then the table.
func Run(ctx context.Context, out io.Writer, o Options) error {
	if o.Runs < 1 {
		return fmt.Errorf("--runs %d: want at least 1", o.Runs)
	}
	bench.PrintLoad(out)
	if o.Throttles == nil {
		o.Throttles = []int{0, 651, 5580}
	}
	if o.Batches == nil {
		o.Batches = []string{"no", "yes"}
	}
	var batches []bool
	for _, b := range o.Batches {
		switch b {
		case "no":
			batches = append(batches, false)
		case "yes":
			batches = append(batches, true)
		default:
			return fmt.Errorf("--tx-batch %q: want no or yes", b)
		}
	}
	for _, itr := range o.Throttles {
		if itr < 0 || itr > 0xffff {
			return fmt.Errorf("--rx-irq-throttle %d: want 0..65535", itr)
		}
	}
	var points []point
	for _, batch := range batches {
		for _, itr := range o.Throttles {
			p, err := measure(ctx, itr, batch, o)
			if err != nil {
				return fmt.Errorf("rx_irq_throttle=%d tx_batch=%v: %w", itr, batch, err)
			}
			fmt.Fprintf(out, "rx_irq_throttle=%-5d tx_batch=%-5v %8.0f irqs/s  driver CPU %5.1f%%  %6.0f Mbit/s\n",
				itr, batch, p.IrqsPerS, p.DriverCPU, p.Mbps)
			points = append(points, p)
		}
	}
	fmt.Fprintf(out, "\n%v per point (median of %d); 1514-byte frames both ways at 1 Gbit/s line rate (%.1f Mbit/s of frames each way); model spin %v:\n", o.Time, o.Runs, lineMbps, o.Spin)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rx_irq_throttle\ttx_batch\tirqs/s\tirqs/kframe\tTX irqs\tTX doorbells/kframe\tdriver CPU %\tdriver µs/frame\tmodel CPU %\tTX Mbit/s\tRX Mbit/s\tMbit/s\tline %\tRX overruns\t")
	for _, p := range points {
		fmt.Fprintf(tw, "%d\t%v\t%.0f\t%.1f\t%d\t%.1f\t%.1f\t%.2f\t%.1f\t%.0f\t%.0f\t%.0f\t%.1f\t%d\t\n", p.RxIrqThrottle, p.TxBatch,
			p.IrqsPerS, p.IrqsPerKframe, p.TxIrqs, p.DoorbellsPerKframe, p.DriverCPU, p.DriverUsPerFrame, p.HwCPU, p.TxMbps, p.RxMbps, p.Mbps, p.LinePct, p.RxOverruns)
	}
	tw.Flush()
	bench.PrintLoad(out)
	if o.JSON != "" {
		return bench.WriteJSON(o.JSON, points)
	}
	return nil
}

// lineMbps is the frame bytes a 1 Gbit/s link carries each way with 1514-byte frames, each
// 1538 bytes on the wire with preamble, FCS and inter-frame gap.
const lineMbps = 1000.0 * 1514 / 1538

// measure runs one point's scenario and measures o.Runs windows of o.Time after a warm-up.
func measure(ctx context.Context, itr int, batch bool, o Options) (point, error) {
	p := point{RxIrqThrottle: itr, TxBatch: batch}
	sc, err := o.StartScenario(ctx, "driver", []byte(Scenario(itr, batch, o.Spin)))
	if err != nil {
		return p, err
	}
	defer sc.Stop()

	type snap struct {
		at               time.Time
		hw, drv, up, far map[string]uint64
		drvCPU, hwCPU    float64
	}
	// take reads every component's counters, or says why it cannot: the scenario ended, or a
	// component has none (it is starting or restarting).
	take := func() (sn snap, err error) {
		st, alive := sc.S.Status()
		if !alive {
			return sn, errors.New("the scenario ended (run with -v for the logs)")
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
		for name, m := range map[string]map[string]uint64{"intel_nic_hw": sn.hw, "ipxe_nic": sn.drv, "uplink": sn.up, "far_end": sn.far} {
			if m == nil {
				return sn, fmt.Errorf("no counters from %s: it is not running (run with -v for the logs)", name)
			}
		}
		return sn, nil
	}
	if !bench.WaitFor(20*time.Second, func() bool {
		sn, err := take()
		return err == nil && sn.up["rx_frames"] > 0 && sn.far["rx_frames"] > 0
	}) {
		return p, fmt.Errorf("no frames both ways within 20 s (run with -v for the logs)")
	}
	time.Sleep(500 * time.Millisecond) // warm-up: rings full, rates settled
	s0, err := take()                  // also starts the CPU window of each process
	if err != nil {
		return p, fmt.Errorf("after the warm-up: %w", err)
	}
	var windows []point
	for range o.Runs {
		select {
		case <-time.After(o.Time):
		case <-ctx.Done():
			return p, ctx.Err()
		}
		s1, err := take()
		if err != nil {
			return p, err
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
		if o.Verbose {
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

// Scenario is the scenario of one bench point: the driver alone on CPU 0; the model,
// the far end's generator and the generator serving the driver's Uplink session on CPU 1. The
// generators wait without spinning (spin="0"): spinning beside the model on one CPU starved it
// and held the wire at ~80 % of line rate.
func Scenario(itr int, batch bool, spin time.Duration) string {
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
