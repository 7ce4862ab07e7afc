package netstack

import (
	"sync/atomic"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/nicstack/nicstack/netdev"
)

// gatedLink holds each batch until its gate opens, telling entered when one arrives, and
// records the packets' first bytes.
type gatedLink struct {
	gate, entered chan struct{}
	got           chan byte
}

func newGatedLink(t *testing.T, n int) *gatedLink {
	l := &gatedLink{gate: make(chan struct{}), entered: make(chan struct{}, n), got: make(chan byte, n)}
	t.Cleanup(l.open)
	return l
}

func (l *gatedLink) open() {
	select {
	case <-l.gate:
	default:
		close(l.gate)
	}
}

func (l *gatedLink) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	l.entered <- struct{}{}
	<-l.gate
	for _, p := range pkts.AsSlice() {
		l.got <- p.Data().AsRange().ToSlice()[0]
	}
	return pkts.Len(), nil
}

func write(q *sendQueue, b byte) tcpip.Error {
	p := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData([]byte{b})})
	defer p.DecRef()
	return q.WritePacket(p)
}

// A full queue holds its writer back until the link takes packets: nothing is dropped and the
// order is kept (gVisor's fifo dropped them, and TCP the rest of its segment with each).
func TestSendQueueHoldsWritersBack(t *testing.T) {
	const size, total = 4, 200
	link := newGatedLink(t, total)
	q := newSendQueue(link, size, nil)
	t.Cleanup(q.Close) // after the gate opens (clean-ups run last first)
	if err := write(q, 0); err != nil {
		t.Fatal(err)
	}
	<-link.entered // the drainer holds packet 0 at the gate
	for i := 1; i <= size; i++ {
		if err := write(q, byte(i)); err != nil {
			t.Fatal(err)
		}
	}
	written := make(chan tcpip.Error, total)
	go func() {
		for i := size + 1; i < total; i++ {
			written <- write(q, byte(i))
		}
	}()
	select {
	case err := <-written:
		t.Fatalf("a write into a full queue returned %v instead of waiting", err)
	case <-time.After(20 * time.Millisecond):
	}
	link.open()
	for i := range total {
		if b := <-link.got; b != byte(i) {
			t.Fatalf("packet %d arrived as %d", i, b)
		}
	}
	for range total - 1 - size {
		if err := <-written; err != nil {
			t.Fatalf("write: %v", err)
		}
	}
}

// Close fails a writer waiting for room rather than leaving it blocked.
func TestSendQueueCloseFailsWaitingWriters(t *testing.T) {
	link := newGatedLink(t, 8)
	q := newSendQueue(link, 1, nil)
	if err := write(q, 0); err != nil {
		t.Fatal(err)
	}
	<-link.entered
	if err := write(q, 1); err != nil { // fills the queue
		t.Fatal(err)
	}
	written := make(chan tcpip.Error, 1)
	go func() { written <- write(q, 2) }()
	closed := make(chan struct{})
	go func() { q.Close(); close(closed) }()
	if err := <-written; err == nil {
		t.Fatal("a write waiting while the queue closed succeeded")
	}
	link.open() // let the drainer finish its batch
	<-closed
}

// fakeClock is a clock the test moves.
type fakeClock struct{ t atomic.Int64 }

func (c *fakeClock) now() time.Duration      { return time.Duration(c.t.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.t.Add(int64(d)) }

// The queue's depth: what waits behind the batch the link holds, with its bytes and the age
// of the oldest's batch; empty once the link has taken everything.
func TestSendQueueDepth(t *testing.T) {
	link := newGatedLink(t, 16)
	clock := &fakeClock{}
	q := newSendQueue(link, 8, clock.now)
	t.Cleanup(q.Close)
	if d := q.Depth(); d != (netdev.Depth{}) {
		t.Fatalf("empty: %+v", d)
	}
	if err := write(q, 0); err != nil {
		t.Fatal(err)
	}
	<-link.entered // the drainer holds packet 0 at the gate: it has left the queue
	clock.advance(time.Second)
	for i := 1; i <= 5; i++ {
		p := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(make([]byte, 100*i))})
		if err := q.WritePacket(p); err != nil {
			t.Fatal(err)
		}
		p.DecRef()
	}
	if d := q.Depth(); d != (netdev.Depth{Frames: 5, Bytes: 1500}) {
		t.Fatalf("5 packets of 1500 bytes just queued: %+v", d)
	}
	clock.advance(3 * time.Millisecond)
	if d := q.Depth(); d.Sojourn != 3*time.Millisecond {
		t.Fatalf("sojourn %v after 3 ms", d.Sojourn)
	}
	link.open()
	for range 6 {
		<-link.got
	}
	for q.Depth() != (netdev.Depth{}) { // the drainer counts a batch out before handing it on
		time.Sleep(time.Millisecond)
	}
}
