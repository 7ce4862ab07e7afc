package netstack

import (
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/nicstack/nicstack/netdev"
)

// sendQueue is the interface's transmit queue: a FIFO that one goroutine drains into the link
// in batches (up to batchMax), so the Outbound sees batches and signals its peer once per
// batch. Unlike gVisor's fifo discipline it holds a writer back while it is full instead of
// dropping the packet, as Linux's TCP small queues keep a socket's data back rather than lose
// it in its own qdisc. gVisor's TCP cuts a 64 KiB segment into MSS-sized packets and gives up
// on the rest at the first one the queue refuses, while taking all of them for sent: with
// fifo's 1024 packets a sender whose window outgrew the queue lost up to 44 frames at a time
// that way, unseen by every counter but its SegmentSendErrors, and resent them after a SACK
// recovery or an RTO (thousands of retransmits in a bidirectional test, none of them lost on
// the wire).
type sendQueue struct {
	link stack.LinkWriter

	mu       sync.Mutex
	notEmpty sync.Cond     // signalled when a packet was queued, or on close
	room     chan struct{} // closed when the drainer took packets; made only while a writer waits
	pkts     []*stack.PacketBuffer
	max      int
	closed   bool
	done     chan struct{}

	// Depth: the bytes queued, and per packet when the batch it came in began: the queue
	// turning non-empty, or the drainer taking a batch and leaving some behind. So the clock
	// is read once per batch, and a packet's age is at most one batch's too high.
	bytes int
	at    []time.Duration
	stamp time.Duration
	now   func() time.Duration
}

// batchMax bounds a batch handed to the link, as gVisor's fifo does (47 packets).
const batchMax = 47

// queueWait bounds how long a writer waits for room. A link that took nothing for as long as
// TCP's minimum RTO is as good as down (a peer gone, not yet detached): the packet is dropped
// then, so that a TCP sender does not hold its endpoint's lock for good.
const queueWait = 200 * time.Millisecond

// newSendQueue makes a queue of max packets into link that reads the time from now (nil: the
// monotonic clock).
func newSendQueue(link stack.LinkWriter, max int, now func() time.Duration) *sendQueue {
	if now == nil {
		epoch := time.Now()
		now = func() time.Duration { return time.Since(epoch) }
	}
	q := &sendQueue{link: link, max: max, pkts: make([]*stack.PacketBuffer, 0, 2*max), done: make(chan struct{}),
		at: make([]time.Duration, 0, 2*max), now: now}
	q.notEmpty.L = &q.mu
	go q.drain()
	return q
}

// WritePacket queues pkt, waiting while the queue is full (up to queueWait). A packet without
// payload (an acknowledgement, ARP) never waits: it may take a second queue's length of room, and
// is dropped beyond, as Linux's qdisc drops them. Waiting, it would hold up TCP's processing of
// the other connections that share the goroutine that sends it.
func (q *sendQueue) WritePacket(pkt *stack.PacketBuffer) tcpip.Error {
	q.mu.Lock()
	if pkt.Data().Size() == 0 {
		defer q.mu.Unlock()
		if q.closed || len(q.pkts) >= 2*q.max {
			return &tcpip.ErrNoBufferSpace{}
		}
		q.push(pkt)
		return nil
	}
	var timeout <-chan time.Time
	for len(q.pkts) >= q.max && !q.closed {
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		q.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(queueWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-room:
		case <-timeout:
			return &tcpip.ErrNoBufferSpace{}
		}
		q.mu.Lock()
	}
	defer q.mu.Unlock()
	if q.closed {
		return &tcpip.ErrClosedForSend{}
	}
	q.push(pkt)
	return nil
}

func (q *sendQueue) push(pkt *stack.PacketBuffer) {
	if len(q.pkts) == 0 {
		q.stamp = q.now()
	}
	q.pkts = append(q.pkts, pkt.IncRef())
	q.at = append(q.at, q.stamp)
	q.bytes += pkt.Size()
	if len(q.pkts) == 1 {
		q.notEmpty.Signal()
	}
}

func (q *sendQueue) drain() {
	defer close(q.done)
	var batch stack.PacketBufferList
	q.mu.Lock()
	for {
		for len(q.pkts) == 0 && !q.closed {
			q.notEmpty.Wait()
		}
		if q.closed {
			for _, p := range q.pkts {
				p.DecRef()
			}
			q.pkts, q.at, q.bytes = q.pkts[:0], q.at[:0], 0
			q.mu.Unlock()
			return
		}
		n := min(len(q.pkts), batchMax)
		for _, p := range q.pkts[:n] {
			batch.PushBack(p)
			q.bytes -= p.Size()
		}
		// Shift down rather than reslice, so the backing array is reused for good.
		rest := copy(q.pkts, q.pkts[n:])
		clear(q.pkts[rest:])
		q.pkts = q.pkts[:rest]
		q.at = q.at[:copy(q.at, q.at[n:])]
		if rest > 0 { // what comes now came after this batch
			q.stamp = q.now()
		}
		q.wakeWriters()
		q.mu.Unlock()
		_, _ = q.link.WritePackets(batch)
		batch.Reset()
		q.mu.Lock()
	}
}

// Depth is what waits in the queue: packets (a TCP segment of several frames counts once
// with offloads), their bytes, and the age of the oldest's batch. Any goroutine may ask; it
// takes the queue's lock for a moment.
func (q *sendQueue) Depth() netdev.Depth {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pkts) == 0 {
		return netdev.Depth{}
	}
	return netdev.Depth{Frames: uint64(len(q.pkts)), Bytes: uint64(q.bytes), Sojourn: max(0, q.now()-q.at[0])}
}

// wakeWriters lets the writers waiting for room look again.
func (q *sendQueue) wakeWriters() {
	if q.room != nil {
		close(q.room)
		q.room = nil
	}
}

// Close drops what is queued, fails writers waiting for room, and waits for the drainer.
func (q *sendQueue) Close() {
	q.mu.Lock()
	q.closed = true
	q.wakeWriters()
	q.notEmpty.Signal()
	q.mu.Unlock()
	<-q.done
}
