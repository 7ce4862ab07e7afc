package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/fifo"
)

// TestCallQueue: one process's calls are made one at a time in the order queued, their
// results reach the loop in that order, a call is cut off at CallTimeout with a log line
// naming the component and the call, and ending the queue cancels the call in flight, skips
// the rest (their done still runs) and ends its goroutine.
func TestCallQueue(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	s := &Supervisor{
		opts: Options{CallTimeout: 50 * time.Millisecond}, log: NewOutput(logs, false).Logger(true),
		events: make(chan func(), 64), quitting: make(chan struct{}),
	}
	q := fifo.New[call]()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.ending.Add(1)
	go s.serveCalls(ctx, "comp", q)
	// loop stands in for the event loop: it runs n events.
	loop := func(n int) {
		for range n {
			select {
			case fn := <-s.events:
				fn()
			case <-time.After(10 * time.Second):
				t.Fatal("no result reached the loop")
			}
		}
	}

	const n = 100
	var made []int // appended by the queue's goroutine; read after the loop has all results
	var answered []int
	for i := range n {
		q.Push(call{
			what: fmt.Sprintf("call %d", i),
			do: func(context.Context) error {
				made = append(made, i)
				if i%10 == 0 {
					time.Sleep(time.Millisecond) // a slower one must not be overtaken
				}
				return nil
			},
			done: func(err error) {
				if err != nil {
					t.Errorf("call %d: %v", i, err)
				}
				answered = append(answered, i)
			},
		})
	}
	loop(n)
	for i := range n {
		if made[i] != i || answered[i] != i {
			t.Fatalf("calls made in order %v, answered in order %v", made, answered)
		}
	}

	var hungErr error
	q.Push(call{what: "Hang", do: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, done: func(err error) { hungErr = err }})
	loop(1)
	if !errors.Is(hungErr, context.DeadlineExceeded) || !strings.Contains(logs.String(), "comp did not answer Hang within 50ms") {
		t.Errorf("a hung call ended with %v; logs:\n%s", hungErr, logs)
	}

	s.opts.CallTimeout = time.Minute // the end, not the timeout, must cut the next one off
	inFlight := make(chan struct{})
	var ended []error
	q.Push(call{what: "Hang", do: func(ctx context.Context) error { close(inFlight); <-ctx.Done(); return ctx.Err() }, done: func(err error) { ended = append(ended, err) }})
	for range 3 {
		q.Push(call{what: "after", do: func(context.Context) error { t.Error("a call was made after the end"); return nil }, done: func(err error) { ended = append(ended, err) }})
	}
	<-inFlight
	t0 := time.Now()
	cancel()
	loop(4)
	s.ending.Wait()
	if time.Since(t0) > time.Second {
		t.Errorf("ending the queue took %v", time.Since(t0))
	}
	for i, err := range ended {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("call %d after the end: %v, want cancelled", i, err)
		}
	}
}

// TestCallQueueQuitting: a result the loop can no longer take closes its call's files.
func TestCallQueueQuitting(t *testing.T) {
	s := &Supervisor{opts: Options{CallTimeout: time.Second}, log: NewOutput(&testutil.SyncBuffer{}, false).Logger(false), quitting: make(chan struct{})}
	close(s.quitting)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	q := fifo.New[call]()
	ctx, cancel := context.WithCancel(context.Background())
	s.ending.Add(1)
	go s.serveCalls(ctx, "comp", q)
	q.Push(call{what: "OpenSession", do: func(context.Context) error { return nil }, done: func(error) { t.Error("done ran after the run ended") }, files: []*os.File{w}})
	cancel()
	s.ending.Wait()
	if err := w.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the call's file is still open (close: %v)", err)
	}
}

// TestHungComponentHoldsUpNoOther: while one component hangs in its OpenSession, another pair
// is started, opens its session and passes traffic, and the supervisor answers, long before
// the hung call times out; then the timeout is logged naming the component and the call.
func TestHungComponentHoldsUpNoOther(t *testing.T) {
	r := startRun(t, `<config>
	<start name="hung"> <binary name="test_echo"/> <provides> <service name="Nic"/> </provides> </start>
</config>`, nil)
	timeout := r.s.opts.CallTimeout
	logged := func(s string) func() bool { return func() bool { return strings.Contains(r.logs.String(), s) } }
	r.waitFor("hung to announce", 20*time.Second, logged("hung announced Nic"))
	hung := r.component("hung").Pid
	if err := syscall.Kill(hung, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(hung, syscall.SIGCONT) })
	r.rewrite(`</config>`, `<start name="a"> <binary name="test_client"/> <route> <service name="Nic"> <child name="hung"/> </service> </route> </start>
</config>`)
	r.waitFor("a's session routed to hung", 20*time.Second, logged("of a routed to hung"))

	t0 := time.Now()
	r.rewrite(`</config>`, `<start name="fast"> <binary name="test_echo"/> <provides> <service name="Nic"/> </provides> </start>
	<start name="b"> <binary name="test_client"/> <route> <service name="Nic"> <child name="fast"/> </service> </route> </start>
</config>`)
	r.waitFor("traffic between b and fast", 2*timeout, func() bool {
		for _, c := range r.status().Components { // b is not there until the change is noticed
			if c.Name == "b" {
				return c.Counters["received"] >= 10
			}
		}
		return false
	})
	firstReply := time.Unix(0, int64(r.component("b").Counters["first_reply_unix_ns"])).Sub(t0)
	hungLogged := logged("hung did not answer")()

	t1 := time.Now()
	r.s.call(func() {})
	loop := time.Since(t1)
	t1 = time.Now()
	st := r.status() // asks hung's State too, which gives up after a second
	status := time.Since(t1)
	for _, c := range st.Components {
		if c.Name == "a" && (len(c.Requests) != 1 || c.Requests[0].State != "waiting") {
			t.Errorf("a's request while hung has its OpenSession: %+v", c.Requests)
		}
	}
	t.Logf("while hung holds its OpenSession (CallTimeout %v): b's first reply %v after the scenario change, loop round trip %v, status %v", timeout, firstReply, loop, status)
	if hungLogged || firstReply > timeout/2 {
		t.Errorf("b's session waited for the hung call: first reply after %v (timeout logged already: %v)", firstReply, hungLogged)
	}
	if loop > 100*time.Millisecond || status > timeout/2 {
		t.Errorf("the supervisor answered slowly while a component hung: loop %v, status %v", loop, status)
	}

	r.waitFor("the timeout's log line", 2*timeout, logged(fmt.Sprintf("hung did not answer OpenSession of session 1 within %v", timeout)))
	if got := time.Since(t0); got > 2*timeout {
		t.Errorf("the timeout came after %v", got)
	}
}

// TestSessionCallsKeepOrder: a server reports its session's link down before its OpenSession
// answers (after 300 ms); the client is told after its own OpenSession, so it sees the link
// down. A client killed while its server's OpenSession is in flight gets nothing of that
// session in its next life: the server closes it behind its OpenSession, and both sides
// end up with the one session opened for the new client.
func TestSessionCallsKeepOrder(t *testing.T) {
	_, memBefore := openFiles(t)
	r := startRun(t, strings.Replace(echoScenario, `<config tag="1"/>`, `<config tag="1" link="no" open_delay_ms="300"/>`, 1), nil)
	client := func() ComponentStatus { return r.component("client") }
	r.waitFor("the session open with the link down", 20*time.Second, func() bool {
		c := client()
		return c.Counters["link_ups"] == 1 && len(c.Sessions) == 1 && c.Requests[0].State == "open"
	})
	r.waitFor("the link down at the client", 5*time.Second, func() bool { return client().Counters["peer_link"] == 0 })
	if c := client(); c.Sessions[0].LinkUp {
		t.Errorf("the client's session is up: %+v", c.Sessions[0])
	}

	routed := func() int { return strings.Count(r.logs.String(), "of client routed to echo") }
	syscall.Kill(client().Pid, syscall.SIGKILL)
	r.waitFor("the restarted client's request", 20*time.Second, func() bool { return routed() == 2 })
	second := client().Pid
	syscall.Kill(second, syscall.SIGKILL) // during echo's 300 ms in OpenSession
	var c, e ComponentStatus
	r.waitFor("the third client's session", 20*time.Second, func() bool {
		c, e = client(), r.component("echo")
		return c.Pid != second && c.State == "running" && len(c.Sessions) == 1 && c.Requests[0].State == "open" && c.Counters["peer_link"] == 0
	})
	if routed() != 3 {
		t.Errorf("the client's request was routed %d times, want 3", routed())
	}
	r.waitFor("echo to serve only the third client's session", 5*time.Second, func() bool {
		e = r.component("echo")
		return len(e.Sessions) == 1 && e.Sessions[0].ID == c.Sessions[0].ID
	})
	if id := c.Sessions[0].ID; id != 3 || c.Requests[0].Session != id {
		t.Errorf("the third client has session %d (request: %+v), want 3", id, c.Requests[0])
	}
	if _, mem := openFiles(t); mem != memBefore {
		t.Errorf("the supervisor holds %d memfds, %d before the run", mem, memBefore)
	}
}
