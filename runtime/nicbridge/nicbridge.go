// Package nicbridge binds a netdev.Device (a TAP of drivers/tap, an AF_PACKET socket of
// drivers/afpacket) to the client end of a packet-stream session, Uplink or Nic: the data path
// of Genode's Linux-hosted NIC driver, shared by linux_nic, packet_nic and the vm's netns
// guest. It is not a component and knows nothing of processes or configs.
//
// Wire to router: one goroutine for the device's lifetime takes a burst from the device (the
// TAP read until empty, or the AF_PACKET blocks ready at one wakeup) into the session's TX
// stream with each frame's offload metadata, and signals the router once per burst. A TAP
// and a vhost-user device (drivers/vhostuser: a guest's chain, into an allocation of its
// frame's size) read straight into the stream's buffer; AF_PACKET's frames are copied from
// its ring. A full
// stream, or no session, drops and counts. A multi-queue device's further queues each have a
// goroutine of their own (RunReader) feeding the same session, a burst at a time. Router to wire: one goroutine per session takes
// a batch from the RX stream, hands it to the device in place (one TAP writev per frame, one
// AF_PACKET kick per batch) and acknowledges the batch with one wakeup. Super-frames up to
// 64 KiB pass whole both ways with their offload metadata.
package nicbridge

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/runtime/affinity"
	ps "github.com/nicstack/nicstack/runtime/packetstream"
)

// Burst bounds the frames taken per read and per write. A read buffer holds the largest frame,
// so the read side keeps Burst x netdev.MaxFrame bytes (2 MiB).
const Burst = 32

// Stats are the driver's own counters (the device counts what it read and wrote). They point to
// storage the caller may own: a component's named counters.
type Stats struct {
	RxFrames  *atomic.Uint64 // frames passed to the router
	RxBytes   *atomic.Uint64
	RxBursts  *atomic.Uint64 // wakeups of the router: at most one per burst
	RxDropped *atomic.Uint64 // frames the session had no room for (queue or buffer full, too large)
	RxNoLink  *atomic.Uint64 // frames read while no session was open
	TxFrames  *atomic.Uint64 // frames from the router handed to the device
	TxBytes   *atomic.Uint64
	TxBatches *atomic.Uint64 // device writes, each acknowledged with one wakeup
	TxDropped *atomic.Uint64 // invalid descriptors from the router, frames a failed write lost
}

// NewStats returns Stats whose counters counter provides by name (rx_frames, ...); nil: private.
func NewStats(counter func(name string) *atomic.Uint64) *Stats {
	if counter == nil {
		counter = func(string) *atomic.Uint64 { return new(atomic.Uint64) }
	}
	return &Stats{
		RxFrames: counter("rx_frames"), RxBytes: counter("rx_bytes"), RxBursts: counter("rx_bursts"),
		RxDropped: counter("rx_dropped"), RxNoLink: counter("rx_no_link"),
		TxFrames: counter("tx_frames"), TxBytes: counter("tx_bytes"), TxBatches: counter("tx_batches"),
		TxDropped: counter("tx_dropped"),
	}
}

// NIC drives one device. Run reads the wire; Attach and Detach bind it to a session.
type NIC struct {
	Stats *Stats

	dev netdev.Device

	mu  sync.Mutex // held while a burst goes to the session; Attach and Detach take it
	out *ps.Source // the session's TX stream, nil while detached
	tx  *txLoop

	bufs  [][]byte // the bursts of a Device that is no DirectReader; bufs[0] is rx's scratch buffer
	sizes []int
	offs  []netdev.Offload
	rx    rxTarget
}

// New returns a NIC over dev, detached, counting in st (nil: private counters).
func New(dev netdev.Device, st *Stats) *NIC {
	if st == nil {
		st = NewStats(nil)
	}
	k := Burst
	if _, ok := dev.(netdev.DirectReader); ok {
		k = 1 // the scratch buffer alone
	}
	n := &NIC{Stats: st, dev: dev, bufs: make([][]byte, k), sizes: make([]int, k), offs: make([]netdev.Offload, k)}
	for i := range n.bufs {
		n.bufs[i] = make([]byte, netdev.MaxFrame)
	}
	n.rx = rxTarget{n: n, limit: netdev.MaxFrame, buf: n.bufs[0]}
	return n
}

// TapFrameLimit is the largest frame a TAP hands out: netdev.MaxFrame with offloads
// (super-frames), else its MTU plus an Ethernet and a VLAN header.
func TapFrameLimit(offload bool, mtu int) int {
	if offload {
		return netdev.MaxFrame
	}
	return mtu + 18
}

// LimitFrames tells the NIC that its device hands out frames of at most max bytes (see
// TapFrameLimit), before Run. A DirectReader's frames are then read into allocations of that
// size rather than of netdev.MaxFrame: single-block ones, which take the blocks freed last
// instead of cycling through the stream's buffer (MTU 1500 without offloads ran 10-20 % slower
// that way).
func (n *NIC) LimitFrames(max int) { n.rx.limit = min(max, netdev.MaxFrame) }

// Run reads bursts from the wire until Read fails, and returns that error (closing the device
// ends it). An error transient says may pass (the interface went down) is reported to it and
// reading goes on; transient may be nil.
func (n *NIC) Run(transient func(error) bool) error {
	direct, _ := n.dev.(netdev.DirectReader)
	for {
		var err error
		if direct != nil {
			_, err = direct.ReadTo(&n.rx)
		} else {
			var k int
			k, err = n.dev.Read(n.bufs, n.sizes, n.offs)
			if k > 0 {
				n.deliver(n.bufs, n.sizes, n.offs, k)
			}
		}
		if err != nil && (transient == nil || !transient(err)) {
			return err
		}
	}
}

// Reader is a further source of the device's frames: a queue of a multi-queue device
// (drivers/vhostuser's Pair).
type Reader interface {
	Read(bufs [][]byte, sizes []int, offs []netdev.Offload) (n int, err error)
}

// RunReader is Run for a further reader of the device, in the caller's goroutine with buffers
// of its own (Burst x netdev.MaxFrame, or a target and its scratch buffer for a
// netdev.DirectReader). Its bursts go to the same session as Run's: the session's TX stream
// has one producer at a time, each burst taking n.mu in turn.
func (n *NIC) RunReader(r Reader, transient func(error) bool) error {
	if direct, ok := r.(netdev.DirectReader); ok {
		t := &rxTarget{n: n, limit: n.rx.limit, buf: make([]byte, netdev.MaxFrame)}
		for {
			if _, err := direct.ReadTo(t); err != nil && (transient == nil || !transient(err)) {
				return err
			}
		}
	}
	bufs, sizes, offs := make([][]byte, Burst), make([]int, Burst), make([]netdev.Offload, Burst)
	for i := range bufs {
		bufs[i] = make([]byte, netdev.MaxFrame)
	}
	for {
		k, err := r.Read(bufs, sizes, offs)
		if k > 0 {
			n.deliver(bufs, sizes, offs, k)
		}
		if err != nil && (transient == nil || !transient(err)) {
			return err
		}
	}
}

// deliver copies k frames into the session and signals the router once.
func (n *NIC) deliver(bufs [][]byte, sizes []int, offs []netdev.Offload, k int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.out
	if out == nil {
		n.Stats.RxNoLink.Add(uint64(k))
		return
	}
	out.ReleaseAcked()
	var frames, bytes, dropped uint64
	for i := 0; i < k; i++ {
		if !submitCopy(out, bufs[i][:sizes[i]], &offs[i]) {
			dropped++
			continue
		}
		frames++
		bytes += uint64(sizes[i])
	}
	n.delivered(out, frames, bytes, dropped)
}

// delivered counts a burst handed to the session (n.mu held), signals the router once and
// lets it run when it falls behind.
func (n *NIC) delivered(out *ps.Source, frames, bytes, dropped uint64) {
	n.Stats.RxBursts.Add(1)
	n.Stats.RxFrames.Add(frames)
	n.Stats.RxBytes.Add(bytes)
	if dropped > 0 {
		n.Stats.RxDropped.Add(dropped)
	}
	out.Wakeup()
	if dropped > 0 || out.InFlight() >= out.Config().QueueSize/2 {
		// The router falls behind; it may share our CPU (linux_tap at MTU 1500 without
		// offloads dropped 1 frame in 80 here while the router waited for our time slice).
		affinity.Yield()
	}
}

// rxTarget is the netdev.Target of a DirectReader: each buffer is an allocation in the session's
// TX stream for the largest frame the stream takes, trimmed to the frame that lands in it, or
// of the frame's size when the device knows it first (netdev.SizedTarget: vhost-user).
// When the stream has no free run that long (small frames in flight split it), the frame
// lands in a scratch buffer and is copied into an allocation of its size, as Read's frames
// are; without a session it is only counted. A burst holds n.mu from Begin to End.
type rxTarget struct {
	n       *NIC
	out     *ps.Source // the session's TX stream during a burst; nil: none
	pk      ps.Packet  // the allocation handed out last
	buf     []byte     // the scratch buffer, netdev.MaxFrame bytes
	scratch bool       // the buffer handed out last is the scratch buffer
	limit   int        // the largest frame the device hands out
	size    int        // the buffers' size during a burst: limit, or less when the stream takes less

	taken, frames, bytes, dropped, noLink uint64 // this burst
}

func (t *rxTarget) Begin() {
	t.n.mu.Lock()
	t.out = t.n.out
	if t.out != nil {
		t.out.ReleaseAcked()
		t.size = min(t.limit, t.out.Config().MaxFrame())
	}
}

func (t *rxTarget) Buffer() []byte { return t.BufferOf(t.size) }

func (t *rxTarget) BufferOf(size int) []byte {
	if t.taken == Burst {
		return nil
	}
	if out := t.out; out != nil && size > 0 && size <= t.size && out.CanSubmit() {
		if p, err := alloc(out, size); err == nil {
			t.pk, t.scratch = p, false
			return out.Payload(p)
		}
	}
	t.scratch = true
	return t.buf
}

func (t *rxTarget) Frame(size int, off *netdev.Offload) {
	if size == 0 {
		if !t.scratch {
			t.out.Release(t.pk)
		}
		return
	}
	t.taken++
	out := t.out
	if out == nil {
		t.noLink++
		return
	}
	var ok bool
	if t.scratch {
		ok = submitCopy(out, t.buf[:size], off)
	} else {
		ok = submit(out, out.Trim(t.pk, size), off)
	}
	if !ok {
		t.dropped++
		return
	}
	t.frames++
	t.bytes += uint64(size)
}

func (t *rxTarget) End() {
	if t.noLink > 0 {
		t.n.Stats.RxNoLink.Add(t.noLink)
	}
	if t.frames+t.dropped > 0 {
		t.n.delivered(t.out, t.frames, t.bytes, t.dropped)
	}
	t.out, t.taken, t.frames, t.bytes, t.dropped, t.noLink = nil, 0, 0, 0, 0, 0
	t.n.mu.Unlock()
}

// submitCopy copies frame into an allocation of its size and submits it with off; false: it
// was dropped (no room).
func submitCopy(out *ps.Source, frame []byte, off *netdev.Offload) bool {
	p, err := alloc(out, len(frame))
	if err != nil {
		return false
	}
	copy(out.Payload(p), frame)
	return submit(out, p, off)
}

// submit hands p, with off's metadata, to the router; false: the submit queue was full (only
// a router that corrupted its queue index lets that happen after CanSubmit), p is released.
func submit(out *ps.Source, p ps.Packet, off *netdev.Offload) bool {
	if *off != (netdev.Offload{}) {
		p = p.WithOffload(*off)
	}
	if !out.TrySubmit(p) {
		out.Release(p)
		return false
	}
	return true
}

// alloc allocates size bytes in out, taking back what the router acknowledged when it has to.
func alloc(out *ps.Source, size int) (ps.Packet, error) {
	p, err := out.Alloc(size)
	if errors.Is(err, ps.ErrExhausted) && out.ReleaseAcked() > 0 {
		p, err = out.Alloc(size)
	}
	return p, err
}

// Attach binds the NIC to an opened Uplink session (its client end): "link up". A NIC serves
// one session at a time; Attach detaches the previous one.
func (n *NIC) Attach(c *ps.Client) error {
	n.Detach()
	t, err := startTX(n, c.RX)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.out, n.tx = c.TX, t
	n.mu.Unlock()
	return nil
}

// Detach unbinds the session; once it returns, the NIC no longer touches the session's memory.
func (n *NIC) Detach() {
	n.mu.Lock()
	t := n.tx
	n.out, n.tx = nil, nil
	n.mu.Unlock()
	if t != nil {
		t.stop()
	}
}

// txLoop moves the router's frames to the wire for one session.
type txLoop struct {
	n    *NIC
	in   *ps.Sink
	w    *ps.Waiter
	halt atomic.Bool
	done chan struct{}

	pkts   []ps.Packet
	frames [][]byte
	offs   []netdev.Offload
	unack  []ps.Packet // taken and handled, not yet acknowledged (ack queue was full)
}

func startTX(n *NIC, in *ps.Sink) (*txLoop, error) {
	// Sleep at once instead of spinning, as a driver waits for its interrupt: on a component's
	// one or two CPUs a spin keeps the wire reader and the kernel from running (measured: the
	// spin cut throughput 5-10x). It sleeps in the netpoller, as the wire reader does, so
	// the two share a thread (linux_tap: 3-5 % more throughput than a thread of its own).
	w, err := ps.NewSignalWaiter(in)
	if err != nil {
		return nil, err
	}
	t := &txLoop{n: n, in: in, w: w, done: make(chan struct{}),
		pkts: make([]ps.Packet, 0, Burst), frames: make([][]byte, 0, Burst), offs: make([]netdev.Offload, 0, Burst),
		unack: make([]ps.Packet, 0, Burst)}
	go t.run()
	return t, nil
}

func (t *txLoop) stop() {
	t.halt.Store(true)
	t.w.Wake()
	<-t.done
	t.w.Close()
}

func (t *txLoop) run() {
	defer close(t.done)
	for !t.halt.Load() {
		if !t.ack() || !t.batch() {
			t.w.Wait()
		}
	}
}

// ack acknowledges what a full ack queue held back; false while some remain.
func (t *txLoop) ack() bool {
	i := 0
	for ; i < len(t.unack) && t.in.TryAck(t.unack[i]); i++ {
	}
	if i > 0 {
		t.unack = append(t.unack[:0], t.unack[i:]...)
		t.in.Wakeup()
	}
	return len(t.unack) == 0
}

// batch takes up to Burst frames from the router, writes them, and acknowledges them with one
// wakeup; false when there was nothing to take.
func (t *txLoop) batch() bool {
	t.pkts, t.frames, t.offs = t.pkts[:0], t.frames[:0], t.offs[:0]
	var invalid uint64
	for len(t.pkts) < Burst {
		p, ok := t.in.TryGet()
		if !ok {
			break
		}
		t.pkts = append(t.pkts, p)
		frame := t.in.Payload(p)
		if frame == nil {
			invalid++
			continue
		}
		t.frames = append(t.frames, frame)
		t.offs = append(t.offs, p.Offload())
	}
	if len(t.pkts) == 0 {
		return false
	}
	// The device reads the frames in place; the router may not touch them before the ack.
	written, err := t.n.dev.Write(t.frames, t.offs)
	if err != nil {
		invalid += uint64(len(t.frames) - written)
	}
	var bytes uint64
	for _, f := range t.frames[:written] {
		bytes += uint64(len(f))
	}
	st := t.n.Stats
	st.TxBatches.Add(1)
	st.TxFrames.Add(uint64(written))
	st.TxBytes.Add(bytes)
	if invalid > 0 {
		st.TxDropped.Add(invalid)
	}
	for i, p := range t.pkts {
		if !t.in.TryAck(p) {
			t.unack = append(t.unack, t.pkts[i:]...)
			break
		}
	}
	t.in.Wakeup()
	return true
}
