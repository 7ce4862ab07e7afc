// Package guest is the VM side of a Nic session: it binds a guest's frames — a user-space
// stack's (package netstack) or a Linux TAP's — to the two packet streams of the session, and
// runs the embedded guests' iperf. The vm and remote_host components are thin wrappers around
// its handlers; tests drive Port and the guests over heap sessions, without processes.
package guests

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/components/internal/netstack"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// batch bounds the frames taken from the sink per round, as max_packets_per_signal does.
const batch = 64

// Port is one session as a guest sees it: frames the guest sends go out through WriteFrames
// (copied into out's bulk buffer, one signal per batch), and a goroutine delivers what arrives
// on in to a receive function in batches, acknowledging each batch with one signal.
type Port struct {
	out *packetstream.Source
	in  *packetstream.Sink

	mu      sync.Mutex // held by WriteFrames (and the drain loop); Close takes it to know the source is idle
	outWait *packetstream.Waiter
	inWait  *packetstream.Waiter
	closing atomic.Bool
	done    chan struct{}

	// q is the egress of a guest with qdisc="fq_codel" (nil: frames go into out in order).
	// WriteFrames queues frames in it (allocating their buffers); its drain loop submits
	// and collects acknowledgements, on outWait (its own endpoint, woken by the peer's
	// acknowledgements and by WriteFrames), which reads the source's state unlocked. But
	// while nothing is in flight or queued the loop is parked on kick, away from the
	// source, and WriteFrames submits what the limit admits itself, as a Linux sender runs
	// its qdisc in its own context: a sparse frame goes out without waiting for the loop's
	// wakeup, late at p99 on two shared vCPUs. It kicks the loop to collect the
	// acknowledgements, off the frame's path.
	q       *qdisc
	drained chan struct{}
	parked  bool          // the drain loop waits on kick, not touching out (under mu)
	kick    chan struct{} // unparks the drain loop
}

// NewPort starts delivering in's frames to deliver, which must not keep the frames after it
// returns (their memory is acknowledged to the peer right after).
func NewPort(out *packetstream.Source, in *packetstream.Sink, deliver func([]netstack.Frame)) (*Port, error) {
	outWait, err := packetstream.NewWaiter(out)
	if err != nil {
		return nil, err
	}
	inWait, err := packetstream.NewWaiter(in)
	if err != nil {
		outWait.Close()
		return nil, err
	}
	p := &Port{out: out, in: in, outWait: outWait, inWait: inWait, done: make(chan struct{})}
	go p.receive(deliver)
	return p, nil
}

// NewQueuedPort is NewPort with the egress of qdisc="fq_codel" (qdisc.go) for frames up to
// mtu bytes with the Ethernet header, its byte limit capped at limitMax (0: no cap).
func NewQueuedPort(out *packetstream.Source, in *packetstream.Sink, deliver func([]netstack.Frame), mtu int, limitMax uint32, cnt qdiscCounters) (*Port, error) {
	q, err := newQdisc(out, mtu, limitMax, cnt)
	if err != nil {
		return nil, err
	}
	p, err := NewPort(out, in, deliver)
	if err != nil {
		return nil, err
	}
	p.q, p.drained, p.kick = q, make(chan struct{}), make(chan struct{}, 1)
	go p.drain()
	return p, nil
}

// drain submits what waits in the qdisc as the peer acknowledges what is in flight; it
// sleeps until an acknowledgement comes or WriteFrames queued frames, and parks while
// nothing is queued or in flight, until WriteFrames kicks it.
func (p *Port) drain() {
	defer close(p.drained)
	for !p.closing.Load() {
		p.mu.Lock()
		if p.q.busy() && p.q.service() > 0 {
			p.out.Wakeup()
		}
		p.parked = !p.q.busy()
		parked := p.parked
		p.mu.Unlock()
		if parked {
			<-p.kick
			p.mu.Lock()
			p.parked = false
			p.mu.Unlock()
			continue
		}
		_ = p.outWait.WaitUntil(time.Now().Add(stallCheck))
	}
}

// unpark kicks the drain loop if it is parked or about to be (a kick already pending is
// enough).
func (p *Port) unpark() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Queue is what waits in the port's qdisc (zero without one); any goroutine may ask.
func (p *Port) Queue() netdev.Depth {
	if p.q == nil {
		return netdev.Depth{}
	}
	return p.q.depth()
}

func (p *Port) receive(deliver func([]netstack.Frame)) {
	defer close(p.done)
	frames := make([]netstack.Frame, 0, batch)
	pkts := make([]packetstream.Packet, 0, batch)
	for !p.closing.Load() {
		frames, pkts = frames[:0], pkts[:0]
		for len(pkts) < batch && p.in.CanAck() {
			pk, ok := p.in.TryGet()
			if !ok {
				break
			}
			pkts = append(pkts, pk)
			if b := p.in.Payload(pk); b != nil {
				frames = append(frames, netstack.Frame{Data: b, Offload: pk.Offload()})
			}
		}
		if len(pkts) == 0 {
			if err := p.inWait.Wait(); errors.Is(err, packetstream.ErrClosed) {
				return
			}
			continue
		}
		deliver(frames)
		for _, pk := range pkts {
			p.in.TryAck(pk) // CanAck above promised the room
		}
		p.in.Wakeup()
	}
}

// stallCheck is how often a writer waiting for the peer's acknowledgements looks whether the
// port is closing (the peer may be gone and never acknowledge).
const stallCheck = 50 * time.Millisecond

// WriteFrames sends a batch: it waits for room while the bulk buffer or the submit queue is
// full (back-pressure, as a full NIC ring holds back a guest), and signals once. It returns how
// many frames it took; fewer only when the port closes or a frame can never fit.
func (p *Port) WriteFrames(frames []netstack.Frame) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing.Load() {
		return 0 // the session may be unmapped already
	}
	if p.q != nil {
		for _, f := range frames {
			p.q.enqueue(f.Data, f.Offload) // a frame dropped is the qdisc's drop: taken all the same
		}
		if !p.parked {
			p.q.publish()
			p.outWait.Wake() // the drain loop submits
			return len(frames)
		}
		if p.q.service() > 0 {
			p.out.Wakeup()
		}
		if p.q.busy() {
			p.unpark() // to collect the acknowledgements and submit the rest
		}
		return len(frames)
	}
	n := 0
	for n < len(frames) && !p.closing.Load() {
		p.reclaim()
		f := frames[n]
		pk, err := p.out.Alloc(len(f.Data))
		if err == nil && !p.out.CanSubmit() {
			p.out.Release(pk)
			err = packetstream.ErrExhausted
		}
		if errors.Is(err, packetstream.ErrExhausted) {
			p.out.Wakeup() // let the peer see what is queued, then wait for its acks
			_ = p.outWait.WaitUntil(time.Now().Add(stallCheck))
			continue
		}
		if err != nil {
			break // larger than the bulk buffer: drop the rest, TCP recovers
		}
		copy(p.out.Payload(pk), f.Data)
		if f.Offload != (netdev.Offload{}) {
			pk = pk.WithOffload(f.Offload)
		}
		p.out.TrySubmit(pk) // CanSubmit above promised the room
		n++
	}
	p.out.Wakeup()
	return n
}

func (p *Port) reclaim() {
	for pk, ok := p.out.GetAcked(); ok; pk, ok = p.out.GetAcked() {
		p.out.Release(pk)
	}
}

// Close stops the port; after it returns, neither stream is touched again.
func (p *Port) Close() {
	p.closing.Store(true)
	p.outWait.Wake()
	p.inWait.Wake()
	<-p.done
	if p.q != nil {
		p.unpark()
		<-p.drained
	}
	p.mu.Lock()
	p.outWait.Close()
	p.inWait.Close()
	p.mu.Unlock()
}
