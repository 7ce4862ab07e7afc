package pkgtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nicstack/nicstack/runtime/fifo"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// Run runs the runtime file under a supervisor (opts; Run sets its Out) until a criterion
// decides, then stops it and returns the verdict. Each log line goes to echo (nil: nowhere)
// as the depot autopilot prints it: seconds since the start, then the line. When the run
// ends by itself (a propagated exit) undecided, nothing can change any more: the criterion
// with after_seconds decides at once, as it would when its time is up.
func Run(ctx context.Context, file string, opts supervisor.Options, echo io.Writer) *Verdict {
	rt, err := Load(file)
	if err != nil {
		return Invalid(file, err)
	}
	lines := fifo.New[string]()
	opts.Out = supervisor.NewGenodeOutput(nil, func(child, text string) { lines.Push(Line(child, text)) })
	s, err := supervisor.New(file, opts)
	if err != nil {
		return Invalid(file, err)
	}
	start := time.Now()
	t := NewTest(rt, start)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	take := func() {
		for _, l := range lines.TakeAll() {
			if echo != nil {
				fmt.Fprintf(echo, "%5.2f %s\n", time.Since(start).Seconds(), l)
			}
			t.Log(l, time.Now())
		}
	}
	deadline := time.NewTimer(time.Until(t.Deadline()))
	defer deadline.Stop()
	for t.Verdict() == nil {
		select {
		case <-lines.Ready():
			take()
		case <-deadline.C:
			t.Timeout(time.Now())
		case err := <-done:
			done <- err // for the deferred wait
			take()      // what it logged before it ended
			var exit *supervisor.PropagatedExit
			switch {
			case errors.As(err, &exit):
				t.Exit(exit.Value, time.Now())
			case err != nil:
				t.Broken(err, time.Now())
			case ctx.Err() != nil:
				t.Broken(ctx.Err(), time.Now())
			}
			t.Ended(time.Now())
		}
	}
	return t.Verdict()
}
