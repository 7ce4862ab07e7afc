package intelhw

import (
	"testing"
	"time"

	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/netdev"
)

// TestWireQueue: a burst waits on the wire with its bytes and ages from when it came off the
// far end until the device has taken all of it.
func TestWireQueue(t *testing.T) {
	clock := &regs.ManualClock{}
	q := wireQueue{clock: clock}
	if d := q.Depth(); d != (netdev.Depth{}) {
		t.Fatalf("empty: %+v", d)
	}
	burst := [][]byte{make([]byte, 60), make([]byte, 1514), make([]byte, 600), make([]byte, 64)}
	clock.Advance(time.Second)
	q.hold(burst)
	if d := q.Depth(); d != (netdev.Depth{Frames: 4, Bytes: 2238}) {
		t.Fatalf("a burst of 4 frames, 2238 bytes, just taken: %+v", d)
	}
	clock.Advance(3 * time.Millisecond)
	q.took(burst[:2], burst[2:])
	if d := q.Depth(); d != (netdev.Depth{Frames: 2, Bytes: 664, Sojourn: 3 * time.Millisecond}) {
		t.Fatalf("2 of 4 frames taken after 3 ms: %+v", d)
	}
	q.took(nil, burst[2:]) // the wire was busy
	clock.Advance(2 * time.Millisecond)
	if d := q.Depth(); d.Frames != 2 || d.Sojourn != 5*time.Millisecond {
		t.Fatalf("after 5 ms: %+v", d)
	}
	q.took(burst[2:], nil)
	if d := q.Depth(); d != (netdev.Depth{}) {
		t.Fatalf("all taken: %+v", d)
	}
	q.hold(burst)
	q.clear()
	if d := q.Depth(); d != (netdev.Depth{}) {
		t.Fatalf("cleared: %+v", d)
	}
}
