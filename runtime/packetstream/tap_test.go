package packetstream

import (
	"bytes"
	"testing"

	"github.com/nicstack/nicstack/netdev"
)

// recorder is a Tap that keeps copies.
type recorder struct {
	frames  [][]byte
	flushes int
}

func (r *recorder) Frame(f []byte) { r.frames = append(r.frames, bytes.Clone(f)) }
func (r *recorder) Flush()         { r.flushes++ }

// A tap sees, from the Wakeup after it was set to the Wakeup after it was taken away, every
// frame a source submits (TrySubmit and Commit) and every frame a sink gets (TryGet and
// TryGetBatch), in order, and a Flush at each Wakeup in between.
func TestTapSeesWhatPassesBetweenWakeups(t *testing.T) {
	src, snk, err := NewHeapStream(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer snk.Close()
	var sent, got recorder
	send := func(i int) {
		if i%2 == 0 {
			p, err := src.Alloc(60 + i)
			if err != nil {
				t.Fatal(err)
			}
			fill(src.Payload(p), i)
			src.TrySubmit(p)
			return
		}
		b, ok := src.Reserve(60 + i)
		if !ok {
			t.Fatal("Reserve")
		}
		fill(b, i)
		src.Commit(len(b), netdev.Offload{})
	}
	take := func(batch bool) {
		if batch {
			var pks [8]Packet
			var frames [8][]byte
			snk.TryAckBatch(pks[:snk.TryGetBatch(pks[:], frames[:])])
		} else {
			for p, ok := snk.TryGet(); ok; p, ok = snk.TryGet() {
				snk.TryAck(p)
			}
		}
		snk.Wakeup()
		src.ReleaseAcked()
	}
	send(0) // before any tap
	src.SetTap(&sent)
	snk.SetTap(&got)
	send(1) // the tap is not in use before the next Wakeup
	src.Wakeup()
	take(false)
	for i := 2; i < 6; i++ {
		send(i)
	}
	src.Wakeup()
	take(true)
	src.SetTap(nil)
	snk.SetTap(nil)
	send(6)
	src.Wakeup()
	take(false)
	send(7)
	src.Wakeup()
	take(true)
	for name, r := range map[string]*recorder{"source": &sent, "sink": &got} {
		if len(r.frames) != 5 || r.flushes != 2 {
			t.Fatalf("%s's tap saw %d frames in %d flushes, want frames 2-6 in 2", name, len(r.frames), r.flushes)
		}
		for k, f := range r.frames {
			if len(f) != 62+k || !check(f, 2+k) {
				t.Errorf("%s's tap: frame %d is not frame %d", name, k, 2+k)
			}
		}
	}
}
