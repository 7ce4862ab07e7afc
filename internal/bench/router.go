package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/runtime/supervisor"
)

// routerPoint is one frame size and routing mode, as printed and written by --json.
type routerPoint struct {
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

// routerModes are the scenarios of one frame size: the direct reference first.
var routerModes = []string{"direct", "udp-forward", "nat"}

func init() {
	var (
		sizes    []int
		duration time.Duration
		runs     int
		jsonFile string
		binDir   string
		verbose  bool
	)
	cmd := &cobra.Command{
		Use:   "router",
		Short: "nic_perf -> nic_router -> nic_perf against nic_perf -> nic_perf, three processes",
		Long: "router runs Genode's nic_perf router test: one nic_perf sends UDP as fast as its stream takes\n" +
			"it, through nic_router (a udp-forward rule, then NAT) to a second nic_perf that counts what\n" +
			"arrives; in the same run the two nic_perfs are connected directly as the reference. On two\n" +
			"CPUs the sender has the first CPU, the router and the receiver share the second; directly\n" +
			"connected, each nic_perf has a CPU. A run measures the direct reference and both routed modes\n" +
			"one after the other, each in a fresh scenario for --time after a warm-up; the ratio of a run\n" +
			"is routed over that run's direct rate, so that a machine whose speed drifts between runs\n" +
			"compares like with like. The table shows the medians of --runs runs.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchRouter(cmd.OutOrStdout(), sizes, duration, runs, supervisor.BinDirs(binDir), jsonFile, verbose)
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&sizes, "sizes", []int{64, 1500}, "Ethernet frame sizes in bytes")
	f.DurationVar(&duration, "time", 2*time.Second, "measuring time per point and run")
	f.IntVar(&runs, "runs", 3, "runs per point; the median is reported")
	f.StringVar(&jsonFile, "json", "", "also write the results to this file as JSON")
	f.StringVar(&binDir, "bin", "", "folder with component binaries, searched first")
	f.BoolVarP(&verbose, "verbose", "v", false, "show the components' logs")
	benchCmd.AddCommand(cmd)
}

// routerSample is one measuring window.
type routerSample struct {
	mpps, gbps, cpu float64
	offered, full   float64 // Mpps sent by nic_perf_tx, and dropped by the router at a full destination
}

func benchRouter(out io.Writer, sizes []int, d time.Duration, runs int, bins []string, jsonFile string, verbose bool) error {
	if runs < 1 {
		return fmt.Errorf("--runs %d: want at least 1", runs)
	}
	printLoad(out)
	var points []routerPoint
	for _, size := range sizes {
		samples := map[string][]routerSample{}
		ratios := map[string][]float64{}
		for run := 1; run <= runs; run++ {
			var direct float64
			for _, mode := range routerModes {
				s, err := measureRouter(mode, size, d, bins, verbose)
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
		for _, mode := range routerModes[1:] {
			m := samples[mode]
			p := routerPoint{FrameBytes: size, Mode: mode, Runs: runs,
				RoutedMpps: median(m, routerSample.Mpps), DirectMpps: median(direct, routerSample.Mpps),
				RouterCPU: median(m, routerSample.CPU), RoutedGbps: median(m, routerSample.Gbps), DirectGbps: median(direct, routerSample.Gbps),
				Ratio: median(ratios[mode], func(r float64) float64 { return r })}
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
	printLoad(out)
	if jsonFile != "" {
		return writeJSON(jsonFile, points)
	}
	return nil
}

func (s routerSample) Mpps() float64 { return s.mpps }
func (s routerSample) Gbps() float64 { return s.gbps }
func (s routerSample) CPU() float64  { return s.cpu }

// measureRouter runs one scenario and measures what reaches the receiving nic_perf for d.
func measureRouter(mode string, size int, d time.Duration, bins []string, verbose bool) (routerSample, error) {
	s, _, stop, err := startBenchScenario(context.Background(), "router", []byte(RouterBenchScenario(mode, size)), bins, verbose)
	if err != nil {
		return routerSample{}, err
	}
	defer stop()

	// snap reads the counters; the router's CPU load is since the previous snap.
	type snap struct {
		rx, tx, full uint64
		cpu          float64
		at           time.Time
	}
	read := func() (sn snap, ok bool) {
		st, alive := s.Status()
		if !alive {
			return sn, false
		}
		sn.at = time.Now()
		for _, c := range st.Components {
			if verbose {
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
	deadline := time.Now().Add(15 * time.Second)
	for {
		if sn, ok := read(); ok && sn.rx > 0 {
			break
		}
		if time.Now().After(deadline) {
			return routerSample{}, fmt.Errorf("no frame reached nic_perf_rx within 15 s (run with -v for the logs)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // warm-up: ARP resolved, spinning settled
	prev, _ := read()
	time.Sleep(d)
	cur, ok := read()
	if !ok {
		return routerSample{}, fmt.Errorf("the scenario ended")
	}
	sec := cur.at.Sub(prev.at).Seconds()
	fps := float64(cur.rx-prev.rx) / sec
	return routerSample{mpps: fps / 1e6, gbps: fps * float64(size) * 8 / 1e9, cpu: cur.cpu,
		offered: float64(cur.tx-prev.tx) / sec / 1e6, full: float64(cur.full-prev.full) / sec / 1e6}, nil
}

// RouterBenchScenario is the scenario of one bench point: "direct" connects the two nic_perfs,
// "udp-forward" and "nat" put nic_router between them, as Genode's nic_perf router test does.
func RouterBenchScenario(mode string, size int) string {
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
