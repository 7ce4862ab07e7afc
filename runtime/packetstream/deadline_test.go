package packetstream

import (
	"errors"
	"os"
	"testing"
	"time"
)

// waitModes runs a Waiter test with the thread blocked in epoll_wait and parked in the netpoller.
func waitModes(t *testing.T, test func(t *testing.T, netpoll bool)) {
	for _, netpoll := range []bool{false, true} {
		name := "thread"
		if netpoll {
			name = "netpoll"
		}
		t.Run(name, func(t *testing.T) { test(t, netpoll) })
	}
}

// newTestWaiter is NewWaiter(ep), in the netpoller if netpoll.
func newTestWaiter(t *testing.T, netpoll bool, ep Endpoint) *Waiter {
	w, err := NewWaiter(ep)
	if err != nil {
		t.Fatal(err)
	}
	if netpoll {
		if err := w.UseNetpoll(); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// A wait with nothing to wake it ends at its deadline, whatever the endpoint waits for.
func TestWaitDeadline(t *testing.T) { waitModes(t, testWaitDeadline) }

func testWaitDeadline(t *testing.T, netpoll bool) {
	src, snk, err := NewHeapStream(Config{QueueSize: 2, BulkSize: 4 * BlockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer snk.Close()
	// Fill the ack queue so the sink also waits for ack space.
	for i := 0; i < 2; i++ {
		p, _ := src.Alloc(100)
		src.TrySubmit(p)
	}
	src.Wakeup()
	for i := 0; i < 2; i++ {
		p, _ := snk.TryGet()
		snk.TryAck(p)
	}
	snk.Wakeup()
	if snk.CanAck() {
		t.Fatal("ack queue not full")
	}
	for _, ep := range []Endpoint{snk, src} {
		w := newTestWaiter(t, netpoll, ep)
		if ep == Endpoint(src) {
			// The source has acknowledgements waiting: it must not sleep at all.
			if err := w.WaitUntil(time.Now().Add(time.Second)); err != nil {
				t.Fatalf("source with acks waiting: %v", err)
			}
			w.Close()
			continue
		}
		start := time.Now()
		err = w.WaitUntil(start.Add(200 * time.Millisecond))
		if !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) > 5*time.Second {
			t.Fatalf("wait returned %v after %v", err, time.Since(start))
		}
		w.Close()
	}
}

// tinyStreamWaiter is a heap stream of two entries and a Waiter on its sink, closed when t ends.
func tinyStreamWaiter(t *testing.T) (*Source, *Sink, *Waiter) { return tinyStream(t, false) }

func tinyStream(t *testing.T, netpoll bool) (*Source, *Sink, *Waiter) {
	src, snk, err := NewHeapStream(Config{QueueSize: 2, BulkSize: 4 * BlockSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(); snk.Close() })
	return src, snk, newTestWaiter(t, netpoll, snk)
}

// Wake from another goroutine ends a wait, and so does a packet submitted by one; Close ends a
// wait with ErrClosed.
func TestWakeAndClose(t *testing.T) { waitModes(t, testWakeAndClose) }

func testWakeAndClose(t *testing.T, netpoll bool) {
	src, snk, w := tinyStream(t, netpoll)
	w.Spin = 0
	time.AfterFunc(50*time.Millisecond, func() {
		p, _ := src.Alloc(64)
		src.TrySubmit(p)
		src.Wakeup()
	})
	for {
		if _, ok := snk.TryGet(); ok {
			break
		}
		if err := w.WaitUntil(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatalf("wait for a packet: %v", err)
		}
	}
	time.AfterFunc(50*time.Millisecond, w.Wake)
	if err := w.WaitUntil(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatalf("woken wait: %v", err)
	}
	time.AfterFunc(50*time.Millisecond, func() { w.Close() })
	if err := w.WaitUntil(time.Now().Add(10 * time.Second)); !errors.Is(err, ErrClosed) {
		t.Fatalf("wait on a closed waiter: %v", err)
	}
	w.Wake() // after Close: nothing happens
}

// Waits whose polls find nothing and whose sleeps are long stop polling (bursty traffic, where
// polling into the gaps only burns the CPU), but probe now and then; probes that find work
// bring polling back, and setting Spin starts afresh.
func TestSpinScoreAdapts(t *testing.T) {
	src, snk, w := tinyStreamWaiter(t)
	defer w.Close()
	w.Spin = 1000
	idle := func() { w.WaitUntil(time.Now().Add(shortSleep + time.Millisecond)) }
	for w.score >= scoreMax/2 {
		idle()
	}
	before := w.score
	for i := 0; i < 2*probeEvery; i++ {
		idle() // only the probes among them cost score
	}
	if w.score != max(0, before-2*longSleepCost) {
		t.Fatalf("score %d after %d idle waits from %d, want %d (two probes ran out)", w.score, 2*probeEvery, before, max(0, before-2*longSleepCost))
	}
	// Work that a poll finds: only probes poll, so it takes probeEvery waits per point.
	p, _ := src.Alloc(100)
	src.TrySubmit(p)
	src.Wakeup()
	for i := 0; w.score < scoreMax/2; i++ {
		if i > scoreMax*probeEvery {
			t.Fatalf("score stuck at %d with work waiting", w.score)
		}
		if err := w.WaitUntil(time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	q, _ := snk.TryGet()
	snk.TryAck(q)
	snk.Wakeup()
	w.Spin = 500
	idle()
	if w.score != scoreMax-longSleepCost {
		t.Fatalf("after Spin was set and one idle wait the score is %d, want %d", w.score, scoreMax-longSleepCost)
	}
}
