// Package iperf runs an iperf scenario once per point of the driver's matrix (rx_irq_throttle
// x tx_batch) and reports the guests' throughput against every component's CPU, optionally
// against the same topology on Linux forwarding and on pasta. It is the harness of
// `nicstack bench iperf`, not the iperf implementation (github.com/nicstack/nicstack/iperf).
package iperf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/bench"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// point is one point of the matrix, as printed and written by --json. The driver's
// settings are null when the scenario has no ipxe_nic.
type point struct {
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

// Options are one invocation's settings.
type Options struct {
	Throttles []int         // the driver's rx_irq_throttle values
	Batches   []string      // the driver's tx_batch values (yes, no)
	Time      time.Duration // iperf test time per point
	Reverse   bool          // the far end sends to the guest (iperf3 -R)
	JSON      string        // also write the points to this file
	Plot      string        // draw throughput and CPU against the throttle value into this PNG
	Compare   []string      // reference paths to measure as well: kernel, pasta, NAME@MTU
	bench.Components
}

// Run runs the scenario at path once per point of the matrix (once if it has no ipxe_nic),
// prints the table and the references' ratios, and fails if a point failed.
func Run(ctx context.Context, out io.Writer, path string, o Options) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if errs := supervisor.Check(path, data, o.Bins, components.Table); len(errs) > 0 {
		return errors.Join(errs...)
	}
	sc, err := loadScenario(path)
	if err != nil {
		return err
	}
	var refs []reference
	for _, c := range o.Compare {
		r, err := parseReference(c)
		if err != nil {
			return err
		}
		refs = append(refs, r)
	}
	batches := make([]bool, len(o.Batches))
	for i, b := range o.Batches {
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
		for i := range o.Throttles {
			for j := range batches {
				matrix = append(matrix, setting{&o.Throttles[i], &batches[j]})
			}
		}
	}
	bench.PrintLoad(out)
	// The bar redraws with carriage returns: only for a terminal; a log or pipe gets a line
	// per point instead.
	_, err = unix.IoctlGetTermios(int(os.Stderr.Fd()), unix.TCGETS)
	tty := err == nil
	bar := progressbar.NewOptions(len(matrix)*int(o.Time.Seconds()+1),
		progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("bench iperf"),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionSetVisibility(tty))
	var points []point
	for i, m := range matrix {
		text, err := sc.patch(m.itr, m.batch, o.Time, o.Reverse)
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
		p, err := measure(ctx, text, sc, o, bar)
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
	writeTable(out, points, sc)
	for _, r := range refs {
		mbps, err := measureReference(ctx, r, o.Time, o.Reverse)
		if err != nil {
			fmt.Fprintf(out, "--compare %s: %v\n", r, err)
			continue
		}
		writeComparison(out, points, r, mbps)
	}
	bench.PrintLoad(out)
	if o.JSON != "" {
		if err := bench.WriteJSON(o.JSON, points); err != nil {
			return err
		}
	}
	if o.Plot != "" {
		if err := drawPlot(o.Plot, points); err != nil {
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
