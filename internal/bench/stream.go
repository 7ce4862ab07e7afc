package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/runtime/affinity"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// streamPoint is one frame size's result, as printed and written by --json.
type streamPoint struct {
	FrameBytes       int     `json:"frame_bytes"`
	Mpps             float64 `json:"mpps"`
	Gbps             float64 `json:"gbps"`
	SignalsPerKFrame float64 `json:"signals_per_kframe"`
	ReferenceMpps    float64 `json:"reference_mpps"`
	Ratio            float64 `json:"ratio_to_reference"`
	Runs             int     `json:"runs"`
}

// peerResult is what one peer process prints (one JSON line) when it ends.
type peerResult struct {
	Frames      uint64  `json:"frames"`
	Bytes       uint64  `json:"bytes"`
	Seconds     float64 `json:"seconds"`
	SignalsSent uint64  `json:"signals_sent"`
	Sleeps      uint64  `json:"sleeps"`
	Invalid     uint64  `json:"invalid"`
	CPUSeconds  float64 `json:"cpu_seconds"` // the whole process, start-up included
	Error       string  `json:"error,omitempty"`
}

func init() {
	var (
		sizes    []int
		duration time.Duration
		runs     int
		jsonFile string
		batch    int
		cpus     string
		queue    int
		blocks   int
		boost    bool
		ipAlign  bool
	)
	cmd := &cobra.Command{
		Use:   "stream",
		Short: "Packet-stream throughput between two pinned processes, against a bare descriptor ring",
		Long: "stream runs a source and a sink process, pinned to different CPUs, over one packet stream\n" +
			"(memfd + eventfds). The source allocates and writes every frame (claiming the lines of the next\n" +
			"frames ahead with PREFETCHW, and with non-temporal stores from 16 KiB), the sink checks every byte,\n" +
			"both wait event-driven (spin briefly, arm, sleep). Right before each point two processes move\n" +
			"bare descriptors over one busy-polled ring, published every 32, as the reference. Each point is\n" +
			"measured --runs times; the table shows the medians, the ratio is the median of the runs' ratios.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pair, err := benchCPUs(cpus)
			if err != nil {
				return err
			}
			base := packetstream.Config{QueueSize: queue, BulkSize: blocks * packetstream.BlockSize, IPAlign: ipAlign}
			if err := base.Validate(); err != nil {
				return err
			}
			return benchStream(cmd, streamBench{sizes, duration, runs, batch, pair, base, boost}, jsonFile)
		},
	}
	cmd.Flags().IntSliceVar(&sizes, "sizes", []int{64, 1500, 65536}, "frame sizes in bytes")
	cmd.Flags().DurationVar(&duration, "time", 2*time.Second, "measuring time per point and run")
	cmd.Flags().IntVar(&runs, "runs", 3, "runs per point; the median is reported")
	cmd.Flags().StringVar(&jsonFile, "json", "", "also write the results to this file as JSON")
	cmd.Flags().IntVar(&batch, "batch", 64, "frames per batch (one Wakeup each)")
	cmd.Flags().IntVar(&queue, "queue", 1024, "entries per queue")
	cmd.Flags().IntVar(&blocks, "blocks", 1024, "bulk buffer size in 1600-byte blocks (frames larger than a block get room for 64)")
	cmd.Flags().BoolVar(&boost, "boost", true, "as root, run each peer in its own scheduling group at nice -20, so that other work on the machine does not share its CPU equally")
	cmd.Flags().BoolVar(&ipAlign, "ip-align", false, "shift frames 2 bytes into their blocks as Genode does (a 64-byte frame then spans two cache lines)")
	cmd.Flags().StringVar(&cpus, "cpus", "", "two CPUs for source and sink, e.g. 0,1 (default: the first two this process may use)")
	benchCmd.AddCommand(cmd)

	var peer streamPeerArgs
	peerCmd := &cobra.Command{
		Use:    "stream-peer",
		Short:  "One side of `bench stream` (started by it, with the stream's files as fds 3-5)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res := runStreamPeer(peer)
			return json.NewEncoder(os.Stdout).Encode(res)
		},
	}
	f := peerCmd.Flags()
	f.StringVar(&peer.role, "role", "", "source, sink, ref-producer or ref-consumer")
	f.IntVar(&peer.size, "size", 64, "frame bytes")
	f.DurationVar(&peer.time, "time", 2*time.Second, "how long the source sends")
	f.IntVar(&peer.batch, "batch", 64, "frames per batch")
	f.IntVar(&peer.cfg.QueueSize, "queue", 1024, "queue entries")
	f.IntVar(&peer.cfg.BulkSize, "bulk", 1024*packetstream.BlockSize, "bulk buffer bytes")
	f.BoolVar(&peer.cfg.IPAlign, "ip-align", false, "shift frames 2 bytes into their blocks")
	f.BoolVar(&peer.boost, "boost", false, "raise this process's scheduling group to nice -20 (root)")
	benchCmd.AddCommand(peerCmd)
}

func benchCPUs(list string) (affinity.Set, error) {
	var s affinity.Set
	var err error
	if list != "" {
		s, err = affinity.Parse(list)
	} else {
		s, err = affinity.Current()
	}
	if err != nil {
		return nil, err
	}
	if len(s) < 2 {
		return nil, fmt.Errorf("bench stream needs two CPUs, has %s", s)
	}
	return s[:2], nil
}

// streamConfig sizes the stream for a frame size: cfg, with the buffer grown to hold 64 frames
// when they are larger than a block (room for the IPAlign shift either way).
func streamConfig(cfg packetstream.Config, size int) packetstream.Config {
	if need := 64 * ((size + packetstream.IPAlignShift + packetstream.BlockSize - 1) / packetstream.BlockSize) * packetstream.BlockSize; need > cfg.BulkSize {
		cfg.BulkSize = need
	}
	return cfg
}

// streamBench is one invocation's settings.
type streamBench struct {
	sizes []int
	d     time.Duration
	runs  int
	batch int
	cpus  affinity.Set
	base  packetstream.Config
	boost bool
}

func benchStream(cmd *cobra.Command, b streamBench, jsonFile string) error {
	sizes, d, runs, batch, cpus, base := b.sizes, b.d, b.runs, b.batch, b.cpus, b.base
	if runs < 1 {
		return fmt.Errorf("--runs must be at least 1")
	}
	out := cmd.OutOrStdout()
	b.boost = b.boost && os.Geteuid() == 0
	fmt.Fprintf(out, "packet stream: source on cpu %d, sink on cpu %d, %s per point, %d runs, batch %d, queues of %d, %d-byte buffer, ip-align %v, boost %v\n",
		cpus[0], cpus[1], d, runs, batch, base.QueueSize, base.BulkSize, base.IPAlign, b.boost)
	type sample struct{ mpps, gbps, sig, ref, ratio float64 }
	samples := make([][]sample, len(sizes))
	for r := 0; r < runs; r++ {
		for i, size := range sizes {
			// The reference runs right before each point: where the host places the two CPUs
			// (sharing a core's caches or not) changes both by a factor of three, and a ratio
			// taken from neighbouring measurements stays comparable.
			ref, err := runPair(b, "ref", 16, packetstream.DefaultConfig())
			if err != nil {
				return fmt.Errorf("reference ring: %w", err)
			}
			refMpps := float64(ref.sink.Frames) / ref.sink.Seconds / 1e6
			res, err := runPair(b, "stream", size, streamConfig(base, size))
			if err != nil {
				return fmt.Errorf("%d-byte frames: %w", size, err)
			}
			fps := float64(res.sink.Frames) / res.sink.Seconds
			sig := float64(res.source.SignalsSent+res.sink.SignalsSent) * 1000 / float64(max(res.sink.Frames, 1))
			samples[i] = append(samples[i], sample{fps / 1e6, fps * float64(size) * 8 / 1e9, sig, refMpps, fps / 1e6 / refMpps})
			fmt.Fprintf(out, "  run %d: %6d B  %8.3f Mpps  %8.2f Gbit/s  %7.3f signals/kframe  reference %5.1f Mpps  (sleeps %d/%d, cpu %.0f%%/%.0f%%)\n",
				r+1, size, fps/1e6, fps*float64(size)*8/1e9, sig, refMpps, res.source.Sleeps, res.sink.Sleeps,
				100*res.source.CPUSeconds/res.source.Seconds, 100*res.sink.CPUSeconds/res.sink.Seconds)
		}
	}
	var points []streamPoint
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(out, "\nmedians of %d runs:\n", runs)
	fmt.Fprintln(tw, "frame bytes\tMpps\tGbit/s\tsignals/1000 frames\treference Mpps\tratio (median of runs)\t")
	for i, size := range sizes {
		p := streamPoint{
			FrameBytes:       size,
			Mpps:             median(samples[i], func(s sample) float64 { return s.mpps }),
			Gbps:             median(samples[i], func(s sample) float64 { return s.gbps }),
			SignalsPerKFrame: median(samples[i], func(s sample) float64 { return s.sig }),
			ReferenceMpps:    median(samples[i], func(s sample) float64 { return s.ref }),
			Ratio:            median(samples[i], func(s sample) float64 { return s.ratio }),
			Runs:             runs,
		}
		points = append(points, p)
		fmt.Fprintf(tw, "%d\t%.3f\t%.2f\t%.3f\t%.1f\t%.3f\t\n", size, p.Mpps, p.Gbps, p.SignalsPerKFrame, p.ReferenceMpps, p.Ratio)
	}
	tw.Flush()
	if jsonFile != "" {
		if err := writeJSON(jsonFile, points); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s\n", jsonFile)
	}
	return nil
}

type pairResult struct{ source, sink peerResult }

// runPair runs the two peer processes of one point: "stream" (source and sink over a packet
// stream) or "ref" (producer and consumer over a bare ring), each pinned to its CPU.
func runPair(b streamBench, kind string, size int, cfg packetstream.Config) (pairResult, error) {
	files, err := packetstream.NewStreamFiles(fmt.Sprintf("bench-%s-%d", kind, size), cfg)
	if err != nil {
		return pairResult{}, err
	}
	defer files.Close()
	self, err := os.Executable()
	if err != nil {
		return pairResult{}, err
	}
	roles := [2]string{"source", "sink"}
	if kind == "ref" {
		roles = [2]string{"ref-producer", "ref-consumer"}
	}
	var cmds [2]*exec.Cmd
	var outs [2]bytes.Buffer
	var errs [2]bytes.Buffer
	for i, role := range roles {
		c := exec.Command(self, "bench", "stream-peer", "--role", role, "--size", strconv.Itoa(size),
			"--time", b.d.String(), "--batch", strconv.Itoa(b.batch), "--boost="+strconv.FormatBool(b.boost),
			"--queue", strconv.Itoa(cfg.QueueSize), "--bulk", strconv.Itoa(cfg.BulkSize), "--ip-align="+strconv.FormatBool(cfg.IPAlign))
		c.ExtraFiles = files.Files()
		// Its own session, so that with --boost it gets its own scheduling group (autogroup).
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
		c.Stdout, c.Stderr = &outs[i], &errs[i]
		// One CPU each: the peer's GOMAXPROCS follows its mask.
		if err := affinity.Run(affinity.Set{b.cpus[i]}, c.Start); err != nil {
			if i == 1 {
				cmds[0].Process.Kill()
				cmds[0].Wait()
			}
			return pairResult{}, err
		}
		cmds[i] = c
	}
	var res [2]peerResult
	timer := time.AfterFunc(b.d+30*time.Second, func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
	})
	defer timer.Stop()
	for i, c := range cmds {
		werr := c.Wait()
		line := strings.TrimSpace(outs[i].String())
		if err := json.Unmarshal([]byte(line), &res[i]); err != nil {
			return pairResult{}, fmt.Errorf("%s: %v (exit: %v) %s", roles[i], err, werr, errs[i].String())
		}
		if res[i].Error != "" {
			return pairResult{}, fmt.Errorf("%s: %s", roles[i], res[i].Error)
		}
	}
	return pairResult{source: res[0], sink: res[1]}, nil
}
