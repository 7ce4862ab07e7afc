package nicbridge

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev"
	ps "github.com/nicstack/nicstack/runtime/packetstream"
)

// wire is a Device in memory: Read hands out the bursts pushed to it, Write records frames.
type wire struct {
	bursts chan [][]byte
	offs   chan []netdev.Offload
	closed chan struct{}

	mu      sync.Mutex
	written [][]byte
	woffs   []netdev.Offload
	writes  int
}

func newWire() *wire {
	return &wire{bursts: make(chan [][]byte, 16), offs: make(chan []netdev.Offload, 16), closed: make(chan struct{})}
}

func (w *wire) Read(bufs [][]byte, sizes []int, offs []netdev.Offload) (int, error) {
	select {
	case b := <-w.bursts:
		o := <-w.offs
		for i, f := range b {
			sizes[i] = copy(bufs[i], f)
			offs[i] = o[i]
		}
		return len(b), nil
	case <-w.closed:
		return 0, os.ErrClosed
	}
}

func (w *wire) Write(bufs [][]byte, offs []netdev.Offload) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, f := range bufs {
		w.written = append(w.written, bytes.Clone(f))
		w.woffs = append(w.woffs, offs[i])
	}
	w.writes++
	return len(bufs), nil
}

func (w *wire) push(frames [][]byte, offs []netdev.Offload) {
	w.bursts <- frames
	w.offs <- offs
}

// got waits until n frames were written and returns them.
func (w *wire) got(t *testing.T, n int) ([][]byte, []netdev.Offload, int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.mu.Lock()
		if len(w.written) >= n {
			defer w.mu.Unlock()
			return w.written, w.woffs, w.writes
		}
		w.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("%d frames written, want %d", len(w.written), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// heapNIC runs a NIC over w attached to a heap session with cfg; the test plays the router on
// srv. Everything stops when t ends.
func heapNIC(t *testing.T, w *wire, cfg ps.Config) (*NIC, *ps.Server) {
	cl, srv, err := ps.NewHeapSession(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := New(w, nil)
	ran := make(chan error, 1)
	go func() { ran <- n.Run(nil) }()
	if err := n.Attach(cl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Detach()
		close(w.closed)
		<-ran
		cl.Close()
		srv.Close()
	})
	return n, srv
}

func superFrame(seed byte) ([]byte, netdev.Offload) {
	f := make([]byte, 65000)
	for i := range f {
		f[i] = seed + byte(i*7)
	}
	f[14+20+12] = 5 << 4 // TCP data offset
	return f, netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOTCPv4, HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
}

// A burst from the wire reaches the router with one signal; a super-frame passes whole with
// its offload metadata.
func TestWireToRouterBurst(t *testing.T) {
	w := newWire()
	n, srv := heapNIC(t, w, ps.Config{QueueSize: 64, BulkSize: 256 * ps.BlockSize})
	sf, so := superFrame(1)
	frames := [][]byte{[]byte("small frame 0"), sf, []byte("small frame 2")}
	offs := []netdev.Offload{{}, so, {}}
	w.push(frames, offs)
	for i := range frames {
		p, err := srv.TX.Get()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(srv.TX.Payload(p), frames[i]) || p.Offload() != offs[i] {
			t.Fatalf("frame %d: %d bytes, offload %+v", i, len(srv.TX.Payload(p)), p.Offload())
		}
		srv.TX.Ack(p)
	}
	if b := n.Stats.RxBursts.Load(); b != 1 {
		t.Errorf("%d bursts, want 1", b)
	}
	if s := srv.TX.Counters().SignalsReceived.Load(); s > 1 {
		t.Errorf("the router was signalled %d times for one burst", s)
	}
}

// A stream with no room drops what does not fit and counts it; frames without a session are
// counted apart.
func TestWireToRouterFullStreamDrops(t *testing.T) {
	w := newWire()
	n, srv := heapNIC(t, w, ps.Config{QueueSize: 8, BulkSize: 64 * ps.BlockSize})
	burst := make([][]byte, Burst)
	offs := make([]netdev.Offload, Burst)
	for i := range burst {
		burst[i] = bytes.Repeat([]byte{byte(i)}, 1000)
	}
	w.push(burst, offs) // the router takes none: what the submit queue holds passes
	deadline := time.Now().Add(5 * time.Second)
	for n.Stats.RxFrames.Load()+n.Stats.RxDropped.Load() < Burst && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	passed := int(n.Stats.RxFrames.Load())
	if d := n.Stats.RxDropped.Load(); passed == 0 || passed > 8 || int(d) != Burst-passed {
		t.Fatalf("%d frames passed a queue of 8, %d dropped", passed, d)
	}
	// The router drains; the next burst passes (acks are reclaimed).
	for i := 0; i < passed; i++ {
		p, err := srv.TX.Get()
		if err != nil {
			t.Fatal(err)
		}
		srv.TX.Ack(p)
	}
	w.push(burst[:passed], offs[:passed])
	for i := 0; i < passed; i++ {
		if p, err := srv.TX.Get(); err != nil || !bytes.Equal(srv.TX.Payload(p), burst[i]) {
			t.Fatalf("frame %d after the drain: %v", i, err)
		} else {
			srv.TX.Ack(p)
		}
	}
	n.Detach()
	w.push(burst[:3], offs[:3])
	for n.Stats.RxNoLink.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if l := n.Stats.RxNoLink.Load(); l != 3 {
		t.Fatalf("%d frames counted without link, want 3", l)
	}
}

// A batch from the router goes to the device in one write, super-frames whole with their
// metadata, and is acknowledged with one signal.
func TestRouterToWireBatch(t *testing.T) {
	w := newWire()
	n, srv := heapNIC(t, w, ps.Config{QueueSize: 64, BulkSize: 512 * ps.BlockSize})
	var frames [][]byte
	var offs []netdev.Offload
	var pkts []ps.Packet
	for i := 0; i < 20; i++ {
		f, o := superFrame(byte(i))
		if i%2 == 1 {
			f, o = bytes.Repeat([]byte{byte(i)}, 60+i), netdev.Offload{}
		}
		frames, offs = append(frames, f), append(offs, o)
		p, err := srv.RX.Alloc(len(f))
		if err != nil {
			t.Fatal(err)
		}
		copy(srv.RX.Payload(p), f)
		pkts = append(pkts, p.WithOffload(o))
	}
	// Submitted in one go, as the router does a batch.
	for _, p := range pkts {
		if !srv.RX.TrySubmit(p) {
			t.Fatal("submit queue full")
		}
	}
	srv.RX.Wakeup()
	got, goffs, writes := w.got(t, len(frames))
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) || goffs[i] != offs[i] {
			t.Fatalf("frame %d: %d bytes, offload %+v", i, len(got[i]), goffs[i])
		}
	}
	for acked := 0; acked < len(frames); acked++ {
		p, err := srv.RX.WaitAcked()
		if err != nil {
			t.Fatal(err)
		}
		srv.RX.Release(p)
	}
	// The stream publishes a long batch in steps of its own, so the NIC may see it in two.
	if b := n.Stats.TxBatches.Load(); writes != int(b) || writes > 2 {
		t.Errorf("%d writes, %d batches for one batch of %d", writes, b, len(frames))
	}
	if s := srv.RX.Counters().SignalsReceived.Load(); s > uint64(writes) {
		t.Errorf("%d ack signals for %d writes", s, writes)
	}
}

// Further readers (a multi-queue device's queues) feed the same session as Run: every frame
// of three readers, 200 bursts in all, reaches the router whole.
func TestReadersShareTheSession(t *testing.T) {
	w := newWire()
	n, srv := heapNIC(t, w, ps.Config{QueueSize: 1024, BulkSize: 1024 * ps.BlockSize})
	queues := []*wire{newWire(), newWire()}
	var ran sync.WaitGroup
	for _, q := range queues {
		ran.Add(1)
		go func() { defer ran.Done(); n.RunReader(q, nil) }()
	}
	defer func() {
		for _, q := range queues {
			close(q.closed)
		}
		ran.Wait()
	}()
	const bursts = 200
	go func() {
		for i := range bursts {
			frame := []byte{byte(i), byte(i >> 8), 'q'}
			[]*wire{w, queues[0], queues[1]}[i%3].push([][]byte{frame}, []netdev.Offload{{}})
		}
	}()
	seen := map[int]bool{}
	for range bursts {
		p, err := srv.TX.Get()
		if err != nil {
			t.Fatal(err)
		}
		f := srv.TX.Payload(p)
		if len(f) != 3 || f[2] != 'q' || seen[int(f[0])|int(f[1])<<8] {
			t.Fatalf("frame % x", f)
		}
		seen[int(f[0])|int(f[1])<<8] = true
		srv.TX.Ack(p)
	}
	if n.Stats.RxFrames.Load() != bursts || n.Stats.RxDropped.Load() != 0 {
		t.Fatalf("rx_frames %d, dropped %d", n.Stats.RxFrames.Load(), n.Stats.RxDropped.Load())
	}
}
