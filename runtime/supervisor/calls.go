package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/nicstack/nicstack/runtime/fifo"
)

// call is one control call in a process's queue.
type call struct {
	what string // names the call in the log: "OpenSession of session 3"
	do   func(context.Context) error
	// done runs on the loop with do's result, or with the queue's end as the error when the
	// process ended before do ran.
	done func(error)
	// files are closed when done cannot run because the run ended first; otherwise done
	// owns them.
	files []*os.File
}

// serveCalls makes the calls queued for process name (its session calls OpenSession,
// CloseSession, LinkState, and UpdateConfig) one at a time in the order the loop queued them,
// each bounded by CallTimeout, and hands every result to the loop: a component sees its
// session's OpenSession before its LinkState and CloseSession, and a hung component holds up
// only its own queue. Once ctx ends (the process is being ended) the calls left are not made
// but still answered, and one in flight is cancelled; the loop queues nothing for a process
// after ending its context, so no call is left behind.
func (s *Supervisor) serveCalls(ctx context.Context, name string, q *fifo.Queue[call]) {
	defer s.ending.Done()
	for {
		c, ok := q.Pop(ctx.Done(), nil)
		if !ok {
			return
		}
		err := ctx.Err()
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
			err = c.do(cctx)
			if errors.Is(cctx.Err(), context.DeadlineExceeded) {
				s.log.Warn(fmt.Sprintf("%s did not answer %s within %v", name, c.what, s.opts.CallTimeout))
			}
			cancel()
		}
		select {
		case s.events <- func() { c.done(err) }:
		case <-s.quitting:
			closeFiles(c.files)
		}
	}
}
