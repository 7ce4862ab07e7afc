package intelhw

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/netdev"
	ps "github.com/nicstack/nicstack/runtime/packetstream"
)

// fakePort hands out the bursts put into in and records the batches written.
type fakePort struct {
	in      chan [][]byte
	inOffs  chan []netdev.Offload
	closed  chan struct{}
	once    sync.Once
	mu      sync.Mutex
	written [][][]byte
	rxDrops uint64
}

func newFakePort() *fakePort {
	return &fakePort{in: make(chan [][]byte, 4), inOffs: make(chan []netdev.Offload, 4), closed: make(chan struct{})}
}

func (p *fakePort) Read(bufs [][]byte, sizes []int, offs []netdev.Offload) (int, error) {
	select {
	case burst := <-p.in:
		o := <-p.inOffs
		for i, f := range burst {
			sizes[i] = copy(bufs[i], f)
			offs[i] = o[i]
		}
		p.mu.Lock()
		p.rxDrops++ // one malformed frame per burst, as the back end counts them
		p.mu.Unlock()
		return len(burst), nil
	case <-p.closed:
		return 0, os.ErrClosed
	}
}

func (p *fakePort) Write(bufs [][]byte, offs []netdev.Offload) (int, error) {
	batch := make([][]byte, len(bufs))
	for i, b := range bufs {
		batch[i] = bytes.Clone(b)
	}
	p.mu.Lock()
	p.written = append(p.written, batch)
	p.mu.Unlock()
	return len(bufs), nil
}

func (p *fakePort) Drops() (uint64, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rxDrops, 0
}

func (p *fakePort) Close() error { p.once.Do(func() { close(p.closed) }); return nil }

func waitCount(t *testing.T, what string, c interface{ Load() uint64 }, want uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c.Load() != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d, want %d", what, c.Load(), want)
		}
	}
}

// A Port as the wire: one at a time; frames with offload metadata are refused and counted;
// with no driver the rest fall off the wire, counted; the device's batch goes out in one
// Write; the port's own drops show as wire_rx_invalid; DetachWire closes the port.
func TestPortWire(t *testing.T) {
	cnt := NewCounters(nil)
	nic := New(intel.DeviceConfig{MAC: intel.DefaultMAC}, intel.NewCounters(nil), cnt)
	p := newFakePort()
	if err := nic.AttachPort(p); err != nil {
		t.Fatal(err)
	}
	if err := nic.AttachPort(newFakePort()); err == nil {
		t.Error("a second port was plugged in")
	}
	cfg := ps.DefaultConfig()
	_, srv, err := ps.NewHeapSession(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := nic.AttachWire(srv); err == nil {
		t.Error("a Nic session was plugged in beside the port")
	}

	frame := make([]byte, 60)
	p.in <- [][]byte{frame, frame, frame}
	p.inOffs <- []netdev.Offload{{}, {GSOType: netdev.GSOTCPv4, GSOSize: 1448}, {Flags: netdev.OffloadNeedsCsum}}
	waitCount(t, "wire_rx_lost", cnt.WireRXLost, 1)
	waitCount(t, "wire_rx_offload", cnt.WireRXOffload, 2)
	waitCount(t, "wire_rx_invalid", cnt.WireRXInvalid, 1)
	if d := nic.WireQueue(); d != (netdev.Depth{}) {
		t.Errorf("frames that fell off the wire still wait on it: %+v", d)
	}

	out := [][]byte{bytes.Repeat([]byte{1}, 60), bytes.Repeat([]byte{2}, 1514)}
	(*wireOut)(nic).Transmit(out)
	p.mu.Lock()
	if len(p.written) != 1 || len(p.written[0]) != 2 || !bytes.Equal(p.written[0][1], out[1]) {
		t.Errorf("written %d batches, want the two frames in one", len(p.written))
	}
	p.mu.Unlock()

	nic.DetachWire()
	select {
	case <-p.closed:
	default:
		t.Error("the port is still open after DetachWire")
	}
	(*wireOut)(nic).Transmit(out)
	if n := cnt.WireTXDropped.Load(); n != 2 {
		t.Errorf("wire_tx_dropped = %d after sending unplugged, want 2", n)
	}
	if err := nic.AttachPort(newFakePort()); err != nil {
		t.Errorf("plugging a port in again: %v", err)
	}
	nic.DetachWire()
}
