package iperf

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/sys/unix"
)

// progress tells on stderr where the matrix is: a bar that redraws itself on a terminal
// (seconds of traffic measured against all runs' time, the run under way, elapsed and
// remaining time), a line per run otherwise (a log, a pipe, or -v, whose component logs
// would tear a bar apart).
type progress struct {
	w       io.Writer
	bar     *progressbar.ProgressBar // nil: plain lines
	perRun  int                      // the bar's units per run: seconds of traffic
	runDone int                      // units of the run under way so far
}

func newProgress(runs int, perRun time.Duration, verbose bool) *progress {
	p := &progress{w: os.Stderr, perRun: max(1, int(perRun.Seconds()+0.5))}
	_, err := unix.IoctlGetTermios(int(os.Stderr.Fd()), unix.TCGETS)
	if err != nil || verbose {
		return p
	}
	p.bar = progressbar.NewOptions(runs*p.perRun,
		progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("bench iperf"),
		progressbar.OptionSetWidth(30), progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true), progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionSetItsString("s"), progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond))
	return p
}

// start begins a run, described as the table names its setting.
func (p *progress) start(desc string) {
	if p.bar == nil {
		fmt.Fprintf(p.w, "bench iperf: %s\n", desc)
		return
	}
	p.runDone = 0
	p.bar.Describe(desc)
}

// traffic says how many seconds of traffic the run under way has measured.
func (p *progress) traffic(seconds float64) {
	n := min(int(seconds), p.perRun)
	if p.bar != nil && n > p.runDone {
		p.bar.Add(n - p.runDone)
		p.runDone = n
	}
}

// end counts the rest of the run as done (it measured a little longer or shorter, or failed).
func (p *progress) end() {
	if p.bar != nil && p.runDone < p.perRun {
		p.bar.Add(p.perRun - p.runDone)
		p.runDone = p.perRun
	}
}

// note prints a line that stays, above the bar.
func (p *progress) note(line string) {
	if p.bar != nil {
		p.bar.Clear()
	}
	fmt.Fprintln(p.w, line)
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}
