package afpacket

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/internal/backendtest"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/runtime/netns"
)

// setup makes namespaces "nic" (veth nsa0, no address: the socket's side) and "host" (veth
// nsb0 at 198.18.1.1/24 with the kernel stack), the host playing 198.18.1.2 behind nsa0.
func setup(t testing.TB, cfg Config) (nic, host *netns.NS, s *Socket, path backendtest.Path) {
	nic = backendtest.Namespace(t, "nic")
	host = backendtest.Namespace(t, "host")
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
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return nic, host, s, backendtest.Path{
		Src: backendtest.Endpoint{MAC: ours, IP: netip.MustParseAddr("198.18.1.2")},
		Dst: backendtest.Endpoint{MAC: backendtest.MAC(t, host, "nsb0"), IP: netip.MustParseAddr("198.18.1.1")},
	}
}

func TestAFPacketAgainstKernel(t *testing.T) {
	_, host, s, path := setup(t, Config{})
	backendtest.Run(t, backendtest.Env{
		Dev: s, MaxFrame: netdev.MaxFrame, Kernel: host, Path: path,
		TxDropped: s.Stats.TxDropped.Load,
	})
	t.Logf("rx %d frames in %d blocks, %d bursts; tx %d frames in %d kicks",
		s.Stats.RxFrames.Load(), s.Stats.RxBlocks.Load(), s.Stats.RxBursts.Load(),
		s.Stats.TxFrames.Load(), s.Stats.TxKicks.Load())
	if s.Stats.TxKicks.Load() > s.Stats.TxFrames.Load() {
		t.Errorf("%d kicks for %d frames", s.Stats.TxKicks.Load(), s.Stats.TxFrames.Load())
	}
}

// More frames than TX slots in one Write: the ring wraps, kicks happen only when it is full
// and at the end, and a frame too large for a slot is dropped and counted.
func TestAFPacketTXRingWraps(t *testing.T) {
	_, host, s, path := setup(t, Config{TxFrames: 8, TxFrameSize: 2048})
	c, err := backendtest.ListenUDP(host, path.Dst.IP, 7100)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var frames [][]byte
	for i := 0; i < 40; i++ {
		f, _ := path.UDP(7000, 7100, []byte{byte(i)}, false)
		frames = append(frames, f)
	}
	big, _ := path.UDP(7000, 7100, make([]byte, 3000), false)
	frames = append(frames, big)
	if n, err := s.Write(frames, nil); n != len(frames) || err != nil {
		t.Fatalf("Write: %d, %v", n, err)
	}
	if d := s.Stats.TxDropped.Load(); d != 1 {
		t.Errorf("TxDropped %d, want 1", d)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	for i := 0; i < 40; i++ {
		n, err := c.Read(buf)
		if err != nil || n != 1 || buf[0] != byte(i) {
			t.Fatalf("datagram %d: %v %v", i, buf[:n], err)
		}
	}
	if k := s.Stats.TxKicks.Load(); k > uint64(40/s.slots+1) {
		t.Errorf("%d kicks for 40 frames through %d slots", k, s.slots)
	}
}

// With RxMinInterval, frames arriving every 2 ms are taken in few wakeups, none lost.
func TestAFPacketRxMinInterval(t *testing.T) {
	const gap = 25 * time.Millisecond
	_, host, s, path := setup(t, Config{RxMinInterval: gap})
	var c *net.UDPConn
	if err := host.Do(func() (err error) {
		c, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(path.Src.IP, 7200)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const frames = 50
	go func() {
		for i := 0; i < frames; i++ {
			c.Write([]byte{byte(i)})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	bufs := make([][]byte, 64)
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	sizes, offs := make([]int, 64), make([]netdev.Offload, 64)
	start, got := time.Now(), 0
	for got < frames {
		n, err := s.Read(bufs, sizes, offs)
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	elapsed := time.Since(start)
	if limit := uint64(elapsed/gap) + 1; s.Stats.RxBursts.Load() > limit {
		t.Fatalf("%d wakeups in %v, at most %d allowed", s.Stats.RxBursts.Load(), elapsed, limit)
	}
	t.Logf("%d frames in %d wakeups over %v", got, s.Stats.RxBursts.Load(), elapsed)
}

// Close wakes a blocked Read with os.ErrClosed.
func TestAFPacketClose(t *testing.T) {
	_, _, s, _ := setup(t, Config{})
	done := make(chan error, 1)
	go func() {
		_, err := s.Read([][]byte{make([]byte, netdev.MaxFrame)}, make([]int, 1), make([]netdev.Offload, 1))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	s.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("Read after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not return after Close")
	}
}

// Link down wakes a waiting Read with ENETDOWN; after link up, frames arrive again.
func TestAFPacketLinkDownAndUp(t *testing.T) {
	nic, host, s, path := setup(t, Config{})
	bufs, sizes, offs := [][]byte{make([]byte, netdev.MaxFrame)}, make([]int, 1), make([]netdev.Offload, 1)
	done := make(chan error, 1)
	go func() {
		_, err := s.Read(bufs, sizes, offs)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := nic.IP("link", "set", "nsa0", "down"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, unix.ENETDOWN) {
			t.Fatalf("Read at link down: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not return at link down")
	}
	if err := nic.IP("link", "set", "nsa0", "up"); err != nil {
		t.Fatal(err)
	}
	var c *net.UDPConn
	if err := host.Do(func() (err error) {
		c, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(path.Src.IP, 7300)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		for i := 0; i < 50; i++ {
			c.Write([]byte("up again"))
			time.Sleep(10 * time.Millisecond)
		}
	}()
	for {
		n, err := s.Read(bufs, sizes, offs)
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := backendtest.Parse(bufs[0][:sizes[0]], offs[0]); n == 1 && ok && p.DPort == 7300 {
			return
		}
	}
}

// A process without privileges sets up and drives a socket made by NewSocket, as packet_nic
// will with the descriptor the supervisor hands over.
func TestAFPacketUnprivilegedFromFile(t *testing.T) {
	if backendtest.InChild() {
		s, err := FromFile(os.NewFile(3, "afpacket"), Config{Interface: "nsa0"})
		if err != nil {
			t.Fatal(err)
		}
		backendtest.Echo(t, s, netdev.MaxFrame)
		return
	}
	nic, host, _, path := setup(t, Config{})
	f, err := NewSocket(nic.File)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	backendtest.RunUnprivileged(t, "TestAFPacketUnprivilegedFromFile", f)
	backendtest.ExpectEcho(t, host, path)
}
