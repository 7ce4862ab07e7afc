package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
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

// callQueue holds the session calls (OpenSession, CloseSession, LinkState) and UpdateConfig
// for one process. One goroutine makes them in the order the loop queued them, so a
// component sees its session's OpenSession before its LinkState and CloseSession, while a
// hung component holds up only its own queue.
type callQueue struct {
	mu    sync.Mutex
	calls []call
	wake  chan struct{}
}

func newCallQueue() *callQueue {
	return &callQueue{wake: make(chan struct{}, 1)}
}

// add queues c; it never blocks, so the loop may call it.
func (q *callQueue) add(c call) {
	q.mu.Lock()
	q.calls = append(q.calls, c)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next waits for the next call; false once ctx has ended and the queue is empty. The loop
// queues nothing for a process after ending its context, so no call is left behind.
func (q *callQueue) next(ctx context.Context) (call, bool) {
	for {
		q.mu.Lock()
		if len(q.calls) > 0 {
			c := q.calls[0]
			q.calls = q.calls[1:]
			q.mu.Unlock()
			return c, true
		}
		q.mu.Unlock()
		if ctx.Err() != nil {
			return call{}, false
		}
		select {
		case <-q.wake:
		case <-ctx.Done():
		}
	}
}

// serveCalls makes the calls queued for process name, one at a time, each bounded by
// CallTimeout, and hands every result to the loop. Once ctx ends (the process is being
// ended) the calls left are not made, and one in flight is cancelled.
func (s *Supervisor) serveCalls(ctx context.Context, name string, q *callQueue) {
	defer s.ending.Done()
	for {
		c, ok := q.next(ctx)
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
