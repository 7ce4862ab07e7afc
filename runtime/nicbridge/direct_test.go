package nicbridge

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev"
	ps "github.com/nicstack/nicstack/runtime/packetstream"
)

// scriptedWire is a DirectReader whose bursts the test scripts: each burst's frames land in the
// target's buffers as a TAP's would, the rest is dropped as too large, and the burst ends
// with the empty read a TAP ends with.
type scriptedWire struct {
	bursts        chan [][]byte
	done          chan int // frames landed per burst
	sized         bool     // ask for each frame's size (netdev.SizedTarget), as vhost-user does
	exact         int      // buffers of just the size asked for
	netdev.Device          // Write, unused: the test sends nothing to the wire
}

func (w *scriptedWire) ReadTo(t netdev.Target) (int, error) {
	frames, ok := <-w.bursts
	if !ok {
		return 0, os.ErrClosed
	}
	t.Begin()
	n := 0
	for _, f := range frames {
		var buf []byte
		if w.sized {
			buf = t.(netdev.SizedTarget).BufferOf(len(f))
			if len(buf) == len(f) {
				w.exact++
			}
		} else {
			buf = t.Buffer()
		}
		if buf == nil {
			break
		}
		if len(f) > len(buf) { // the TAP drops it and reads the next into the same buffer
			continue
		}
		off := netdev.Offload{GSOSize: uint16(len(f))}
		t.Frame(copy(buf, f), &off)
		n++
	}
	if buf := t.Buffer(); buf != nil {
		t.Frame(0, nil)
	}
	t.End()
	w.done <- n
	return n, nil
}

// The direct path: frames land in the session's buffers with their metadata, one wakeup per
// burst; when small frames in flight leave no run for the largest frame, frames are copied in
// from the scratch buffer instead; a full submit queue drops and counts; the blocks of every
// allocation for the largest frame come back (the buffer holds one such allocation at a time,
// and every burst needs one); without a session frames are counted as such.
func TestDirectRead(t *testing.T) {
	cfg := ps.Config{QueueSize: 4, BulkSize: (netdev.MaxFrame/ps.BlockSize + 2) * ps.BlockSize}
	cl, srv, err := ps.NewHeapSession(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	defer srv.Close()
	w := &scriptedWire{bursts: make(chan [][]byte), done: make(chan int)}
	n := New(w, nil)
	ran := make(chan error, 1)
	go func() { ran <- n.Run(nil) }()
	if err := n.Attach(cl); err != nil {
		t.Fatal(err)
	}
	frame := func(size int, b byte) []byte { return bytes.Repeat([]byte{b}, size) }
	burst := func(frames ...[]byte) int {
		w.bursts <- frames
		select {
		case k := <-w.done:
			return k
		case <-time.After(10 * time.Second):
			t.Fatal("the NIC took no burst")
			return 0
		}
	}
	// take gets what reached the router, checks it and acknowledges it.
	take := func(want ...[]byte) {
		t.Helper()
		for i, f := range want {
			p, ok := srv.TX.TryGet()
			if !ok {
				t.Fatalf("frame %d of %d did not reach the router", i, len(want))
			}
			if got := srv.TX.Payload(p); !bytes.Equal(got, f) || p.Offload().GSOSize != uint16(len(f)) {
				t.Fatalf("frame %d: %d bytes (GSO size %d), want %d", i, len(got), p.Offload().GSOSize, len(f))
			}
			srv.TX.TryAck(p)
		}
		if _, ok := srv.TX.TryGet(); ok {
			t.Fatal("more frames reached the router than were delivered")
		}
		srv.TX.Wakeup()
	}

	for round := range 3 { // the largest frames, one at a time: nothing may leak between them
		big := frame(netdev.MaxFrame, byte(round))
		burst(big)
		take(big)
	}
	small := [][]byte{frame(60, 1), frame(1500, 2), frame(9000, 3), frame(60, 4), frame(60, 5), frame(60, 6)}
	if k := burst(small...); k != 6 {
		t.Fatalf("the wire landed %d of 6 frames", k)
	}
	take(small[:4]...) // the submit queue holds 4
	if d := n.Stats.RxDropped.Load(); d != 2 {
		t.Errorf("%d frames dropped at a full queue, want 2", d)
	}
	big := frame(netdev.MaxFrame, 9)
	burst(big)
	take(big)
	if got, want := n.Stats.RxBursts.Load(), uint64(5); got != want {
		t.Errorf("%d wakeups of the router for 5 bursts", got)
	}

	n.Detach()
	burst(frame(60, 7), frame(60, 8))
	if got := n.Stats.RxNoLink.Load(); got != 2 {
		t.Errorf("%d frames counted without a session, want 2", got)
	}
	if got, want := n.Stats.RxFrames.Load(), uint64(3+4+1); got != want {
		t.Errorf("%d frames delivered, want %d", got, want)
	}
	close(w.bursts)
	if err := <-ran; err != os.ErrClosed {
		t.Errorf("Run ended with %v", err)
	}
}

// A device that knows each frame's size first (vhost-user) gets an allocation of just that
// size in the session's stream, and its frames reach the router as the others do.
func TestSizedDirectRead(t *testing.T) {
	cfg := ps.Config{QueueSize: 8, BulkSize: 16 * ps.BlockSize}
	cl, srv, err := ps.NewHeapSession(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	defer srv.Close()
	w := &scriptedWire{bursts: make(chan [][]byte), done: make(chan int), sized: true}
	n := New(w, nil)
	ran := make(chan error, 1)
	go func() { ran <- n.Run(nil) }()
	if err := n.Attach(cl); err != nil {
		t.Fatal(err)
	}
	frames := [][]byte{bytes.Repeat([]byte{1}, 60), bytes.Repeat([]byte{2}, 1500), bytes.Repeat([]byte{3}, 9000)}
	w.bursts <- frames
	if k := <-w.done; k != 3 || w.exact != 3 {
		t.Fatalf("%d frames landed, %d in buffers of their size; want 3 and 3", k, w.exact)
	}
	for i, f := range frames {
		p, ok := srv.TX.TryGet()
		if !ok || !bytes.Equal(srv.TX.Payload(p), f) {
			t.Fatalf("frame %d did not reach the router whole", i)
		}
	}
	close(w.bursts)
	if err := <-ran; err != os.ErrClosed {
		t.Errorf("Run ended with %v", err)
	}
}
