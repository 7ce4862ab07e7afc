// Package stream measures the packet stream alone: a source and a sink process, pinned to
// two CPUs, against two processes moving bare descriptors over a busy-polled ring. It is the
// harness of `nicstack bench stream` and the peers' code that nicstack re-executes for it, not
// the packet stream itself (runtime/packetstream).
package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/runtime/affinity"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// point is one frame size's result, as printed and written by --json.
type point struct {
	FrameBytes       int     `json:"frame_bytes"`
	Mpps             float64 `json:"mpps"`
	Gbps             float64 `json:"gbps"`
	SignalsPerKFrame float64 `json:"signals_per_kframe"`
	ReferenceMpps    float64 `json:"reference_mpps"`
	Ratio            float64 `json:"ratio_to_reference"`
	Runs             int     `json:"runs"`
}

// PeerResult is what one peer process prints (one JSON line) when it ends.
type PeerResult struct {
	Frames      uint64  `json:"frames"`
	Bytes       uint64  `json:"bytes"`
	Seconds     float64 `json:"seconds"`
	SignalsSent uint64  `json:"signals_sent"`
	Sleeps      uint64  `json:"sleeps"`
	Invalid     uint64  `json:"invalid"`
	CPUSeconds  float64 `json:"cpu_seconds"` // the whole process, start-up included
	Error       string  `json:"error,omitempty"`
}

// CPUs picks the two CPUs of source and sink: the first two of list (like "0,1"), or of the
// CPUs this process may use when list is empty.
func CPUs(list string) (affinity.Set, error) {
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

// Options are one invocation's settings.
type Options struct {
	Sizes []int         // frame sizes in bytes, a point each
	Time  time.Duration // measuring time per point and run
	Runs  int           // runs per point; the medians are reported
	Batch int           // frames per batch (one Wakeup each)
	CPUs  affinity.Set  // source's and sink's CPU
	// Stream sizes the packet stream; frames larger than a block get room for 64 (streamConfig).
	Stream packetstream.Config
	// Boost runs each peer at nice -20 in its own scheduling group; only as root.
	Boost bool
	// Peer is the command line that starts one peer (nicstack's hidden `bench stream-peer`,
	// which calls RunPeer); the peer's flags (PeerOptions) are appended.
	Peer []string
	JSON string // also write the points to this file
}

// Run measures every frame size Runs times, printing each run, then the table of medians.
func Run(out io.Writer, o Options) error {
	sizes, d, runs, batch, cpus, base := o.Sizes, o.Time, o.Runs, o.Batch, o.CPUs, o.Stream
	if err := base.Validate(); err != nil {
		return err
	}
	if runs < 1 {
		return fmt.Errorf("--runs must be at least 1")
	}
	o.Boost = o.Boost && os.Geteuid() == 0
	fmt.Fprintf(out, "packet stream: source on cpu %d, sink on cpu %d, %s per point, %d runs, batch %d, queues of %d, %d-byte buffer, ip-align %v, boost %v\n",
		cpus[0], cpus[1], d, runs, batch, base.QueueSize, base.BulkSize, base.IPAlign, o.Boost)
	type sample struct{ mpps, gbps, sig, ref, ratio float64 }
	samples := make([][]sample, len(sizes))
	for r := 0; r < runs; r++ {
		for i, size := range sizes {
			// The reference runs right before each point: where the host places the two CPUs
			// (sharing a core's caches or not) changes both by a factor of three, and a ratio
			// taken from neighbouring measurements stays comparable.
			ref, err := runPair(o, "ref", 16, packetstream.DefaultConfig())
			if err != nil {
				return fmt.Errorf("reference ring: %w", err)
			}
			refMpps := float64(ref.sink.Frames) / ref.sink.Seconds / 1e6
			res, err := runPair(o, "stream", size, streamConfig(base, size))
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
	var points []point
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(out, "\nmedians of %d runs:\n", runs)
	fmt.Fprintln(tw, "frame bytes\tMpps\tGbit/s\tsignals/1000 frames\treference Mpps\tratio (median of runs)\t")
	for i, size := range sizes {
		p := point{
			FrameBytes:       size,
			Mpps:             bench.Median(samples[i], func(s sample) float64 { return s.mpps }),
			Gbps:             bench.Median(samples[i], func(s sample) float64 { return s.gbps }),
			SignalsPerKFrame: bench.Median(samples[i], func(s sample) float64 { return s.sig }),
			ReferenceMpps:    bench.Median(samples[i], func(s sample) float64 { return s.ref }),
			Ratio:            bench.Median(samples[i], func(s sample) float64 { return s.ratio }),
			Runs:             runs,
		}
		points = append(points, p)
		fmt.Fprintf(tw, "%d\t%.3f\t%.2f\t%.3f\t%.1f\t%.3f\t\n", size, p.Mpps, p.Gbps, p.SignalsPerKFrame, p.ReferenceMpps, p.Ratio)
	}
	tw.Flush()
	if o.JSON != "" {
		if err := bench.WriteJSON(o.JSON, points); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s\n", o.JSON)
	}
	return nil
}

type pairResult struct{ source, sink PeerResult }

// runPair runs the two peer processes of one point: "stream" (source and sink over a packet
// stream) or "ref" (producer and consumer over a bare ring), each pinned to its CPU.
func runPair(o Options, kind string, size int, cfg packetstream.Config) (pairResult, error) {
	files, err := packetstream.NewStreamFiles(fmt.Sprintf("bench-%s-%d", kind, size), cfg)
	if err != nil {
		return pairResult{}, err
	}
	defer files.Close()
	roles := [2]string{"source", "sink"}
	if kind == "ref" {
		roles = [2]string{"ref-producer", "ref-consumer"}
	}
	var cmds [2]*exec.Cmd
	var outs [2]bytes.Buffer
	var errs [2]bytes.Buffer
	for i, role := range roles {
		peer := PeerOptions{Role: role, Size: size, Time: o.Time, Batch: o.Batch, Stream: cfg, Boost: o.Boost}
		c := exec.Command(o.Peer[0], slices.Concat(o.Peer[1:], peer.args())...)
		c.ExtraFiles = files.Files()
		// Its own session, so that with --boost it gets its own scheduling group (autogroup).
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
		c.Stdout, c.Stderr = &outs[i], &errs[i]
		// One CPU each: the peer's GOMAXPROCS follows its mask.
		if err := affinity.Run(affinity.Set{o.CPUs[i]}, c.Start); err != nil {
			if i == 1 {
				cmds[0].Process.Kill()
				cmds[0].Wait()
			}
			return pairResult{}, err
		}
		cmds[i] = c
	}
	var res [2]PeerResult
	timer := time.AfterFunc(o.Time+30*time.Second, func() {
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
