package packetstream

import (
	"testing"
	"time"
)

// Eager calls between two goroutines: every frame handed over one at a time, each side
// sleeping whenever the other is slower (Spin 0 forces the armed-flag path).
func TestEagerHandoff(t *testing.T) {
	src, snk, err := NewHeapStream(Config{QueueSize: 4, BulkSize: 4 * BlockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer snk.Close()
	src.own.Spin, snk.own.Spin = 0, 0
	const n = 20000
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			p, err := snk.Get()
			if err != nil {
				done <- err
				return
			}
			if !check(snk.Payload(p), i) {
				t.Errorf("frame %d corrupt", i)
			}
			if err := snk.Ack(p); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := 0; i < n; i++ {
		p, err := src.Alloc(100)
		for err == ErrExhausted {
			var a Packet
			if a, err = src.WaitAcked(); err != nil {
				t.Fatal(err)
			}
			src.Release(a)
			p, err = src.Alloc(100)
		}
		if err != nil {
			t.Fatal(err)
		}
		fill(src.Payload(p), i)
		if err := src.Submit(p); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("stalled")
	}
	t.Logf("signals: source sent %d, sink sent %d; sleeps %d/%d", src.ctr.SignalsSent.Load(), snk.ctr.SignalsSent.Load(),
		src.ctr.Sleeps.Load(), snk.ctr.Sleeps.Load())
}
