package nicbridge

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/nicstack/nicstack/drivers/afpacket"
	"github.com/nicstack/nicstack/drivers/tap"
	"github.com/nicstack/nicstack/internal/backendtest"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/runtime/netns"
	ps "github.com/nicstack/nicstack/runtime/packetstream"
)

// router plays the router on the server end of an Uplink session, as a backendtest.Device:
// Read takes what the NIC received from the wire, Write hands frames to the NIC to send. So the
// back ends' shared kernel tests run through the NIC and the session.
type router struct {
	srv     *ps.Server
	w       *ps.Waiter
	reading sync.Mutex
	closed  bool
}

func newRouter(t testing.TB, srv *ps.Server) *router {
	w, err := ps.NewWaiter(srv.TX)
	if err != nil {
		t.Fatal(err)
	}
	w.Spin = 0 // the test's goroutines share two CPUs with the NIC's and the kernel
	return &router{srv: srv, w: w}
}

func (r *router) Read(bufs [][]byte, sizes []int, offs []netdev.Offload) (int, error) {
	r.reading.Lock()
	defer r.reading.Unlock()
	n := 0
	for !r.closed {
		for n < len(bufs) {
			p, ok := r.srv.TX.TryGet()
			if !ok {
				break
			}
			if f := r.srv.TX.Payload(p); f != nil && len(f) <= len(bufs[n]) {
				sizes[n], offs[n] = copy(bufs[n], f), p.Offload()
				n++
			}
			r.srv.TX.TryAck(p) // the ack queue is as long as the submit queue
		}
		r.srv.TX.Wakeup()
		if n > 0 {
			return n, nil
		}
		if err := r.w.Wait(); err != nil {
			return 0, err
		}
	}
	return 0, os.ErrClosed
}

// Write submits the frames with one wakeup, as the router does per batch (more only while the
// stream is full).
func (r *router) Write(bufs [][]byte, offs []netdev.Offload) (int, error) {
	out := r.srv.RX
	defer out.Wakeup()
	for i, f := range bufs {
		out.ReleaseAcked()
		p, err := out.Alloc(len(f))
		for errors.Is(err, ps.ErrExhausted) {
			out.Wakeup()
			var acked ps.Packet
			if acked, err = out.WaitAcked(); err != nil {
				return i, err
			}
			out.Release(acked)
			p, err = out.Alloc(len(f))
		}
		if err != nil {
			return i, err
		}
		copy(out.Payload(p), f)
		if offs != nil {
			p = p.WithOffload(offs[i])
		}
		if !out.TrySubmit(p) {
			out.Wakeup()
			if err := out.Submit(p); err != nil {
				return i, err
			}
		}
	}
	return len(bufs), nil
}

// sent waits until the NIC took every frame Write handed it, then returns count(): a device
// counter that is up to date for those frames.
func (r *router) sent(count func() uint64) func() uint64 {
	return func() uint64 {
		for r.srv.RX.InFlight() > 0 {
			p, err := r.srv.RX.WaitAcked()
			if err != nil {
				break
			}
			r.srv.RX.Release(p)
		}
		return count()
	}
}

// close ends a Read in progress and every later one.
func (r *router) close() {
	r.w.Close()
	r.reading.Lock()
	r.closed = true
	r.reading.Unlock()
}

// attach runs a NIC over dev, attached to a heap Uplink session whose server end the returned
// router plays. Everything stops when t ends, the device closed by closeDev.
func attach(t testing.TB, dev netdev.Device, closeDev func() error) (*NIC, *router) {
	cfg := ps.Config{QueueSize: 1024, BulkSize: 2560 * ps.BlockSize}
	cl, srv, err := ps.NewHeapSession(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := New(dev, nil)
	ran := make(chan error, 1)
	go func() { ran <- n.Run(nil) }()
	if err := n.Attach(cl); err != nil {
		t.Fatal(err)
	}
	r := newRouter(t, srv)
	t.Cleanup(func() {
		r.close()
		n.Detach()
		closeDev()
		if err := <-ran; !errors.Is(err, os.ErrClosed) {
			t.Errorf("Run ended with %v", err)
		}
		cl.Close()
		srv.Close()
	})
	return n, r
}

// ourMAC is the host the tests play behind the NIC.
var ourMAC = net.HardwareAddr{0x02, 0, 0x5e, 0, 0, 2}

// tapSetup: TAP "nstap0" at 198.18.0.1/24 in a namespace of its own, the NIC behind it.
func tapSetup(t testing.TB) (*netns.NS, *tap.Device, backendtest.Path) {
	ns := backendtest.Namespace(t, "lnic")
	d, err := tap.Create(tap.Config{Name: "nstap0", MTU: 1500, NetNS: ns.File})
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.AddrAdd("nstap0", "198.18.0.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := ns.IP("neigh", "replace", "198.18.0.2", "lladdr", ourMAC.String(), "dev", "nstap0"); err != nil {
		t.Fatal(err)
	}
	return ns, d, backendtest.Path{
		Src: backendtest.Endpoint{MAC: ourMAC, IP: netip.MustParseAddr("198.18.0.2")},
		Dst: backendtest.Endpoint{MAC: backendtest.MAC(t, ns, "nstap0"), IP: netip.MustParseAddr("198.18.0.1")},
	}
}

// packetSetup: namespaces "nic" (veth nsa0, the socket's side) and "host" (nsb0 at
// 198.18.1.1/24), the NIC on nsa0.
func packetSetup(t testing.TB, cfg afpacket.Config) (*netns.NS, *afpacket.Socket, backendtest.Path) {
	nic := backendtest.Namespace(t, "pnic")
	host := backendtest.Namespace(t, "phost")
	if err := netns.Veth("nsa0", nic, "nsb0", host); err != nil {
		t.Fatal(err)
	}
	if err := host.AddrAdd("nsb0", "198.18.1.1/24"); err != nil {
		t.Fatal(err)
	}
	ours := backendtest.MAC(t, nic, "nsa0")
	if err := host.IP("neigh", "replace", "198.18.1.2", "lladdr", ours.String(), "dev", "nsb0"); err != nil {
		t.Fatal(err)
	}
	cfg.Interface, cfg.NetNS = "nsa0", nic.File
	s, err := afpacket.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return host, s, backendtest.Path{
		Src: backendtest.Endpoint{MAC: ours, IP: netip.MustParseAddr("198.18.1.2")},
		Dst: backendtest.Endpoint{MAC: backendtest.MAC(t, host, "nsb0"), IP: netip.MustParseAddr("198.18.1.1")},
	}
}

// Frames and super-frames both ways between the kernel behind a TAP and the router.
func TestTAPThroughSession(t *testing.T) {
	ns, d, path := tapSetup(t)
	n, r := attach(t, d, d.Close)
	backendtest.Run(t, backendtest.Env{Dev: r, MaxFrame: netdev.MaxFrame, Kernel: ns, Path: path, TxDropped: r.sent(d.Stats.TxDropped.Load)})
	checkBatching(t, n)
}

// The same over AF_PACKET on a veth.
func TestPacketThroughSession(t *testing.T) {
	host, s, path := packetSetup(t, afpacket.Config{})
	n, r := attach(t, s, s.Close)
	backendtest.Run(t, backendtest.Env{Dev: r, MaxFrame: netdev.MaxFrame, Kernel: host, Path: path, TxDropped: r.sent(s.Stats.TxDropped.Load)})
	checkBatching(t, n)
	if s.Stats.TxKicks.Load() > n.Stats.TxBatches.Load() {
		t.Errorf("%d TX kicks for %d batches", s.Stats.TxKicks.Load(), n.Stats.TxBatches.Load())
	}
}

func checkBatching(t *testing.T, n *NIC) {
	t.Helper()
	st := n.Stats
	t.Logf("rx %d frames in %d bursts, %d dropped, %d without link; tx %d frames in %d batches, %d dropped",
		st.RxFrames.Load(), st.RxBursts.Load(), st.RxDropped.Load(), st.RxNoLink.Load(),
		st.TxFrames.Load(), st.TxBatches.Load(), st.TxDropped.Load())
	if st.RxBursts.Load() == 0 || st.RxBursts.Load() > st.RxFrames.Load() {
		t.Errorf("%d router wakeups for %d frames", st.RxBursts.Load(), st.RxFrames.Load())
	}
	if st.TxBatches.Load() == 0 || st.TxBatches.Load() > st.TxFrames.Load()+st.TxDropped.Load() {
		t.Errorf("%d batches for %d frames", st.TxBatches.Load(), st.TxFrames.Load())
	}
}
