package packetstream

import (
	"errors"
	"os"
	"testing"
	"time"
)

// TestAckSignal: a Waiter over a source's AckSignal sleeps while nothing is acknowledged and
// wakes by the sink's signal once it acknowledges; a source that collected its
// acknowledgements is not ready; an invalid head from the peer is never ready.
func TestAckSignal(t *testing.T) {
	cli, srv, err := NewHeapSession(DefaultConfig(), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	defer srv.Close()
	src, sink := cli.TX, srv.TX
	w, err := NewWaiter(src.AckSignal())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Spin = 0
	p, err := src.Alloc(100)
	if err != nil || !src.TrySubmit(p) {
		t.Fatal("submit", err)
	}
	src.Wakeup()
	if err := w.WaitUntil(time.Now().Add(10 * time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("wait with nothing acknowledged: %v, want the deadline", err)
	}
	got, ok := sink.TryGet()
	if !ok {
		t.Fatal("the sink got nothing")
	}
	done := make(chan error, 1)
	go func() { done <- w.WaitUntil(time.Now().Add(10 * time.Second)) }()
	time.Sleep(5 * time.Millisecond) // most likely asleep by now; either way it must return
	if !sink.TryAck(got) {
		t.Fatal("ack")
	}
	sink.Wakeup()
	if err := <-done; err != nil {
		t.Fatalf("wait for the acknowledgement: %v", err)
	}
	if _, ok := src.GetAcked(); !ok {
		t.Fatal("no acknowledgement collected")
	}
	src.Wakeup()
	if (ackSignal{src}).ready() {
		t.Error("ready with every acknowledgement collected")
	}
	srv.TX.ack.ring.head.Store(src.ack.ring.tail.Load() + src.ack.size + 1) // the peer's garbage
	if (ackSignal{src}).ready() {
		t.Error("ready with an invalid head")
	}
}
