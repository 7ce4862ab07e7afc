// Package router measures nic_router as Genode's nic_perf router test does: nic_perf ->
// nic_router -> nic_perf against the two nic_perfs connected directly, three processes under a
// supervisor. It is the harness of `nicstack bench router`, not the router itself
// (github.com/nicstack/nicstack/router).
package router

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nicstack/nicstack/bench"
)

// point is one frame size and routing mode, as printed and written by --json.
type point struct {
	FrameBytes int     `json:"frame_bytes"`
	Mode       string  `json:"mode"` // udp-forward or nat
	RoutedMpps float64 `json:"routed_mpps"`
	DirectMpps float64 `json:"direct_mpps"`
	Ratio      float64 `json:"ratio"`      // routed / direct
	RouterCPU  float64 `json:"router_cpu"` // percent of one CPU
	RoutedGbps float64 `json:"routed_gbps"`
	DirectGbps float64 `json:"direct_gbps"`
	Runs       int     `json:"runs"`
}

// Modes are the scenarios of one frame size: the direct reference first.
var Modes = []string{"direct", "udp-forward", "nat"}

// Options are one invocation's settings.
type Options struct {
	Sizes []int         // Ethernet frame sizes in bytes
	Time  time.Duration // measuring time per point and run
	Runs  int           // runs per point; the medians are reported
	JSON  string        // also write the points to this file
	bench.Components
}

// sample is one measuring window.
type sample struct {
	mpps, gbps, cpu float64
	offered, full   float64 // Mpps sent by nic_perf_tx, and dropped by the router at a full destination
}

// Run measures every frame size Runs times, each run the direct reference and both routed
// modes, printing each window, then the table of medians.
func Run(out io.Writer, o Options) error {
	sizes, d, runs := o.Sizes, o.Time, o.Runs
	if runs < 1 {
		return fmt.Errorf("--runs %d: want at least 1", runs)
	}
	bench.PrintLoad(out)
	var points []point
	for _, size := range sizes {
		samples := map[string][]sample{}
		ratios := map[string][]float64{}
		for run := 1; run <= runs; run++ {
			var direct float64
			for _, mode := range Modes {
				s, err := measure(o, mode, size)
				if err != nil {
					return fmt.Errorf("%s, %d bytes, run %d: %w", mode, size, run, err)
				}
				samples[mode] = append(samples[mode], s)
				ratio := ""
				if mode == "direct" {
					direct = s.mpps
				} else if direct > 0 {
					ratios[mode] = append(ratios[mode], s.mpps/direct)
					ratio = fmt.Sprintf("  %.2f of direct", s.mpps/direct)
				}
				fmt.Fprintf(out, "%5d B  run %d  %-11s  %7.3f Mpps  %6.2f Gbit/s  router CPU %3.0f%%  (sent %.3f Mpps, dropped at full queue %.3f Mpps)%s\n",
					size, run, mode, s.mpps, s.gbps, s.cpu, s.offered, s.full, ratio)
			}
		}
		direct := samples["direct"]
		for _, mode := range Modes[1:] {
			m := samples[mode]
			p := point{FrameBytes: size, Mode: mode, Runs: runs,
				RoutedMpps: bench.Median(m, sample.Mpps), DirectMpps: bench.Median(direct, sample.Mpps),
				RouterCPU: bench.Median(m, sample.CPU), RoutedGbps: bench.Median(m, sample.Gbps), DirectGbps: bench.Median(direct, sample.Gbps),
				Ratio: bench.Median(ratios[mode], func(r float64) float64 { return r })}
			points = append(points, p)
		}
	}
	fmt.Fprintf(out, "\nmedians of %d runs of %v (routed/direct: the median of the runs' ratios):\n", runs, d)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "frame B\tmode\trouted Mpps\trouted Gbit/s\tdirect Mpps\tdirect Gbit/s\trouted/direct\trouter CPU %\t")
	for _, p := range points {
		fmt.Fprintf(tw, "%d\t%s\t%.3f\t%.2f\t%.3f\t%.2f\t%.2f\t%.0f\t\n", p.FrameBytes, p.Mode, p.RoutedMpps, p.RoutedGbps, p.DirectMpps, p.DirectGbps, p.Ratio, p.RouterCPU)
	}
	tw.Flush()
	bench.PrintLoad(out)
	if o.JSON != "" {
		return bench.WriteJSON(o.JSON, points)
	}
	return nil
}

func (s sample) Mpps() float64 { return s.mpps }
func (s sample) Gbps() float64 { return s.gbps }
func (s sample) CPU() float64  { return s.cpu }

// measure runs one scenario and measures what reaches the receiving nic_perf for o.Time.
func measure(o Options, mode string, size int) (sample, error) {
	sc, err := o.StartScenario(context.Background(), "router", []byte(Scenario(mode, size)))
	if err != nil {
		return sample{}, err
	}
	defer sc.Stop()

	// snap reads the counters; the router's CPU load is since the previous snap.
	type snap struct {
		rx, tx, full uint64
		cpu          float64
		at           time.Time
	}
	read := func() (sn snap, ok bool) {
		st, alive := sc.S.Status()
		if !alive {
			return sn, false
		}
		sn.at = time.Now()
		for _, c := range st.Components {
			if o.Verbose {
				fmt.Fprintf(os.Stderr, "%s: CPU %.0f%%, %v\n", c.Name, c.CPULoad, c.Counters)
			}
			switch c.Name {
			case "nic_perf_rx":
				sn.rx, ok = c.Counters["rx_frames"], true
			case "nic_perf_tx":
				sn.tx = c.Counters["tx_frames"]
			case "nic_router":
				sn.cpu, sn.full = c.CPULoad, c.Counters["dropped_full"]
			}
		}
		return sn, ok
	}
	if !bench.WaitFor(15*time.Second, func() bool { sn, ok := read(); return ok && sn.rx > 0 }) {
		return sample{}, fmt.Errorf("no frame reached nic_perf_rx within 15 s (run with -v for the logs)")
	}
	time.Sleep(300 * time.Millisecond) // warm-up: ARP resolved, spinning settled
	prev, ok := read()
	if !ok {
		return sample{}, fmt.Errorf("the scenario ended during the warm-up")
	}
	time.Sleep(o.Time)
	cur, ok := read()
	if !ok {
		return sample{}, fmt.Errorf("the scenario ended")
	}
	sec := cur.at.Sub(prev.at).Seconds()
	fps := float64(cur.rx-prev.rx) / sec
	return sample{mpps: fps / 1e6, gbps: fps * float64(size) * 8 / 1e9, cpu: cur.cpu,
		offered: float64(cur.tx-prev.tx) / sec / 1e6, full: float64(cur.full-prev.full) / sec / 1e6}, nil
}

// Scenario is the scenario of one bench point: "direct" connects the two nic_perfs,
// "udp-forward" and "nat" put nic_router between them, as Genode's nic_perf router test does.
func Scenario(mode string, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<config>
	<parent-provides> <service name="LOG"/> </parent-provides>
	<default-route> <any-service> <parent/> <any-child/> </any-service> </default-route>
	<default caps="100" ram="64M"/>
	<affinity-space width="2" height="1"/>
`)
	// Routed, the sender has the first CPU and the receiver shares the second with the router
	// (it needs far less than the sender): it does not spin, which would only keep the router
	// from running. Its queue holds 2048 frames: the router's destination blocks (reused last
	// released first) then stay few enough to be cached; with 8192 a 1500-byte run fell to
	// 3-5 Mpps in about half the runs in a fast state of the machine, against 6.2-7.6 with 2048
	// (1024, Genode's default, costs signals at 64 B). The sender spins as in the direct run:
	// it has its CPU, and a sender that sleeps whenever its queue is full costs the router a
	// signal to it (an eventfd write and an IPI) every round.
	dst, rxService, rxShared := "10.0.2.2", "", ` spin="0" queue_size="2048" bulk_size="3276800"`
	switch mode {
	case "direct":
		rxService, rxShared = ` service="Nic"`, "" // each has a CPU of its own
		b.WriteString(`	<start name="nic_perf_rx"> <binary name="nic_perf"/> <affinity xpos="1" ypos="0"/>
		<provides> <service name="Nic"/> </provides>
`)
	case "udp-forward", "nat":
		rule := `<udp-forward port="12345" domain="rx" to="10.0.2.2"/>`
		nat := ""
		if mode == "udp-forward" {
			dst = "10.0.1.1"
		} else {
			rule = `<udp dst="10.0.2.0/24"> <permit-any domain="rx"/> </udp>`
			nat = `<nat domain="tx" udp-ports="1000"/>`
		}
		fmt.Fprintf(&b, `	<start name="nic_router"> <affinity xpos="1" ypos="0"/>
		<provides> <service name="Nic"/> <service name="Uplink"/> </provides>
		<config>
			<policy label_prefix="nic_perf_tx" domain="tx"/>
			<policy label_prefix="nic_perf_rx" domain="rx"/>
			<domain name="tx" interface="10.0.1.1/24"> %s </domain>
			<domain name="rx" interface="10.0.2.1/24"> %s </domain>
		</config>
	</start>
	<start name="nic_perf_rx"> <binary name="nic_perf"/> <affinity xpos="1" ypos="0"/>
`, rule, nat)
	default:
		panic("bench router: unknown mode " + mode)
	}
	fmt.Fprintf(&b, `		<config ip="10.0.2.2"%s%s period_ms="0"/>
	</start>
	<start name="nic_perf_tx"> <binary name="nic_perf"/> <affinity xpos="0" ypos="0"/>
		<config tx="yes" ip="10.0.1.2" dst_ip="%s" dst_port="12345" size="%d" period_ms="0"/>
	</start>
</config>
`, rxService, rxShared, dst, size)
	return b.String()
}
