package guests

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components/internal/netstack"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// udpFrame is an Ethernet/IPv4/UDP frame of n bytes from source port sport, its payload's
// first bytes seq.
func udpFrame(n int, sport uint16, seq uint32) []byte {
	f := make([]byte, n)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(n-14))
	copy(ip[12:], []byte{198, 18, 0, 2})
	copy(ip[16:], []byte{10, 0, 1, 2})
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], 5201)
	binary.BigEndian.PutUint16(ip[24:], uint16(n-34))
	binary.BigEndian.PutUint32(f[42:], seq)
	return f
}

// qdiscPeer is the stream's far end, which acknowledges only when told to (the wire).
type qdiscPeer struct {
	t    *testing.T
	sink *packetstream.Sink
}

// get takes every frame submitted so far without acknowledging it, returning the packets
// and (sport, seq) of each.
func (p qdiscPeer) get() (pks []packetstream.Packet, got [][2]uint32) {
	for {
		pk, ok := p.sink.TryGet()
		if !ok {
			return pks, got
		}
		b := p.sink.Payload(pk)
		pks = append(pks, pk)
		got = append(got, [2]uint32{uint32(binary.BigEndian.Uint16(b[34:])), binary.BigEndian.Uint32(b[42:])})
	}
}

func (p qdiscPeer) ack(pks []packetstream.Packet) {
	for _, pk := range pks {
		if !p.sink.TryAck(pk) {
			p.t.Fatal("ack queue full")
		}
	}
	p.sink.Wakeup()
}

// take takes every frame submitted so far and acknowledges it.
func (p qdiscPeer) take() [][2]uint32 {
	pks, got := p.get()
	p.ack(pks)
	return got
}

// await gets frames, unacknowledged, until there are some (10 s at most).
func (p qdiscPeer) await() ([]packetstream.Packet, [][2]uint32) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if pks, got := p.get(); len(pks) > 0 {
			return pks, got
		}
	}
	p.t.Fatal("no frame left the qdisc in 10 s")
	return nil, nil
}

func newQdiscPort(t *testing.T) (*Port, qdiscPeer, *Counters) {
	t.Helper()
	client, server, err := packetstream.NewHeapSession(packetstream.DefaultConfig(), packetstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctr := privateCounters()
	p, err := NewQueuedPort(client.TX, client.RX, func([]netstack.Frame) {}, 1514, 0, ctr.Qdisc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, qdiscPeer{t: t, sink: server.TX}, ctr
}

// TestQdiscSparseFirst: a bulk backlog waits in the qdisc, not in the stream (the byte limit
// starts at one frame and lets nothing more go while nothing is acknowledged); a sparse
// flow's frame, written after it, is the first to leave once the peer acknowledges; the
// limit grows as the peer keeps up, and everything leaves in each flow's order.
func TestQdiscSparseFirst(t *testing.T) {
	p, peer, ctr := newQdiscPort(t)
	var bulk []netstack.Frame
	for i := range 40 {
		bulk = append(bulk, netstack.Frame{Data: udpFrame(1514, 1000, uint32(i))})
	}
	if n := p.WriteFrames(bulk); n != 40 {
		t.Fatalf("took %d of 40 frames", n)
	}
	held, first := peer.await()
	time.Sleep(20 * time.Millisecond) // the drain loop would submit more now if it were to
	if n := p.WriteFrames([]netstack.Frame{{Data: udpFrame(64, 2000, 0)}}); n != 1 {
		t.Fatalf("took %d of the sparse frame", n)
	}
	time.Sleep(20 * time.Millisecond)
	more, got2 := peer.get()
	held, first = append(held, more...), append(first, got2...)
	if len(first) > 2 || first[0] != [2]uint32{1000, 0} {
		t.Fatalf("in the stream before any acknowledgement: %v, want bulk frame 0 (and at most one more)", first)
	}
	if q := p.Queue(); q.Frames != uint64(41-len(first)) {
		t.Fatalf("the qdisc holds %d frames, want the other %d", q.Frames, 41-len(first))
	}
	peer.ack(held)
	var got [][2]uint32
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 41-len(first) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s the peer has %d of %d frames; %d queued, %d dropped (CoDel, when the machine held the drain back 100 ms), %d without room",
				len(got), 41-len(first), p.Queue().Frames, ctr.Qdisc.Dropped.Load(), ctr.Qdisc.NoRoom.Load())
		}
		got = append(got, peer.take()...)
		time.Sleep(time.Millisecond)
	}
	if got[0] != [2]uint32{2000, 0} {
		t.Errorf("first frame after the acknowledgement %v, want the sparse flow's", got[0])
	}
	next := uint32(len(first))
	for _, g := range got {
		if g[0] == 1000 {
			if g[1] != next {
				t.Fatalf("bulk frame %d where %d was next", g[1], next)
			}
			next++
		}
	}
	if q := p.Queue(); q.Frames != 0 || ctr.Qdisc.Dropped.Load() != 0 || ctr.Qdisc.NoRoom.Load() != 0 {
		t.Errorf("after all left: %d queued, %d dropped, %d without room", q.Frames, ctr.Qdisc.Dropped.Load(), ctr.Qdisc.NoRoom.Load())
	}
	if lim := p.q.bql.Limit(); lim <= 1514 {
		t.Errorf("byte limit %d after the peer kept up with a backlog: want it grown past one frame", lim)
	}
}

// TestQdiscDropsNotBlocks: a peer that acknowledges nothing does not hold the stack back:
// WriteFrames takes every frame, and the qdisc drops what exceeds its limit (half the
// stream's descriptors) from the fattest flow, counted, with each dropped frame's buffer
// freed for the frames after it.
func TestQdiscDropsNotBlocks(t *testing.T) {
	p, peer, ctr := newQdiscPort(t)
	cfg := packetstream.DefaultConfig()
	p.mu.Lock() // the drain loop submits nothing meanwhile: the backlog stands

	limit := min(cfg.QueueSize, cfg.BulkSize/packetstream.BlockSize) / 2
	for i := range 4 * limit {
		p.q.enqueue(udpFrame(1514, 1000, uint32(i)), netdev.Offload{})
	}
	p.q.publish()
	p.mu.Unlock()
	if n := p.WriteFrames([]netstack.Frame{{Data: udpFrame(1514, 1000, uint32(4*limit))}}); n != 1 {
		t.Fatalf("took %d", n)
	}
	if q := p.Queue(); q.Frames > uint64(limit) || q.Frames == 0 {
		t.Errorf("%d frames queued, want at most the limit %d", q.Frames, limit)
	}
	if ctr.Qdisc.Dropped.Load() == 0 {
		t.Error("no drops counted over the limit")
	}
	if ctr.Qdisc.NoRoom.Load() != 0 {
		t.Errorf("%d frames found no room in the stream's buffer: the scheduler should drop first", ctr.Qdisc.NoRoom.Load())
	}
	// The sparse flow still gets through ahead of the standing queue.
	held, _ := peer.await()
	p.WriteFrames([]netstack.Frame{{Data: udpFrame(64, 2000, 0)}})
	time.Sleep(20 * time.Millisecond)
	more, _ := peer.get()
	peer.ack(append(held, more...))
	if _, got := peer.await(); got[0][0] != 2000 {
		t.Errorf("after the acknowledgement %v left first, want the sparse flow", got[0])
	}
}

// awaitParked waits until the drain loop has parked: nothing queued or in flight.
func awaitParked(t *testing.T, p *Port) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		parked := p.parked
		p.mu.Unlock()
		if parked {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the drain loop did not park in 10 s")
		}
	}
}

// TestQdiscDirectSubmit: a frame written to an idle qdisc (nothing queued or in flight) is
// in the stream when WriteFrames returns, submitted by the writer, not by the drain loop; a
// frame written while others wait goes out in the scheduler's order, after the frame it
// picks first.
func TestQdiscDirectSubmit(t *testing.T) {
	p, peer, _ := newQdiscPort(t)
	for i := range 3 {
		awaitParked(t, p)
		if n := p.WriteFrames([]netstack.Frame{{Data: udpFrame(64, 2000, uint32(i))}}); n != 1 {
			t.Fatalf("took %d", n)
		}
		pks, got := peer.get() // at once: no sleep for another goroutine
		if len(got) != 1 || got[0] != [2]uint32{2000, uint32(i)} {
			t.Fatalf("sparse frame %d: the stream holds %v when WriteFrames returned, want it", i, got)
		}
		peer.ack(pks)
	}
	if q := p.Queue(); q.Frames != 0 {
		t.Fatalf("%d frames wait in the qdisc", q.Frames)
	}

	// Frames waiting when the writer runs the qdisc: it submits the scheduler's pick first.
	awaitParked(t, p)
	p.mu.Lock()
	for i := range 3 {
		p.q.enqueue(udpFrame(1514, 1000, uint32(i)), netdev.Offload{})
	}
	p.mu.Unlock()
	if n := p.WriteFrames([]netstack.Frame{{Data: udpFrame(1514, 3000, 0)}}); n != 1 {
		t.Fatalf("took %d", n)
	}
	var got [][2]uint32
	for deadline := time.Now().Add(10 * time.Second); len(got) < 4; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s the peer has %v", got)
		}
		got = append(got, peer.take()...)
	}
	if got[0] != [2]uint32{1000, 0} {
		t.Errorf("first out %v, want the waiting bulk frame 0 (the scheduler's pick), not the frame written after: %v", got[0], got)
	}
	next := uint32(0)
	for _, g := range got {
		if g[0] == 1000 {
			if g[1] != next {
				t.Fatalf("bulk frame %d where %d was next: %v", g[1], next, got)
			}
			next++
		}
	}
}

// TestQdiscWriteDoesNotAllocate: writing to the qdisc, directly submitted or queued, and
// the peer's acknowledgements allocate nothing.
func TestQdiscWriteDoesNotAllocate(t *testing.T) {
	p, peer, _ := newQdiscPort(t)
	frames := []netstack.Frame{{Data: udpFrame(64, 2000, 0)}}
	awaitParked(t, p)
	allocs := testing.AllocsPerRun(200, func() {
		p.WriteFrames(frames)
		for pk, ok := peer.sink.TryGet(); ok; pk, ok = peer.sink.TryGet() {
			peer.sink.TryAck(pk)
		}
		peer.sink.Wakeup()
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per write", allocs)
	}
}
