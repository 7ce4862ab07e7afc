package tap

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/backendtest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/runtime/netns"
)

// ourMAC is the host behind the TAP that the tests play.
var ourMAC = net.HardwareAddr{0x02, 0, 0x5e, 0, 0, 2}

// setup makes a namespace with TAP "nstap0" at 198.18.0.1/24, our host 198.18.0.2 behind it.
func setup(t testing.TB) (*netns.NS, *Device, backendtest.Path) {
	ns := backendtest.Namespace(t, "tap")
	d, err := Create(Config{Name: "nstap0", MTU: 1500, NetNS: ns.File})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
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

func TestTAPAgainstKernel(t *testing.T) {
	ns, d, path := setup(t)
	testutil.RequireCommand(t, "ethtool")
	k, err := ns.Exec("ethtool", "-k", "nstap0")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tx-checksumming: on", "tx-tcp-segmentation: on", "tx-tcp6-segmentation: on"} {
		if !strings.Contains(string(k), want) {
			t.Errorf("ethtool -k nstap0 lacks %q", want)
		}
	}
	backendtest.Run(t, backendtest.Env{
		Dev: d, MaxFrame: netdev.MaxFrame, Kernel: ns, Path: path,
		TxDropped: d.Stats.TxDropped.Load,
	})
	if d.Stats.TxJoined.Load() < 29 {
		t.Errorf("%d frames written joined into super-frames, want the burst's 29 at least", d.Stats.TxJoined.Load())
	}
	if d.Stats.RxBursts.Load() == 0 || d.Stats.RxBursts.Load() > d.Stats.RxFrames.Load() {
		t.Errorf("bursts %d for %d frames", d.Stats.RxBursts.Load(), d.Stats.RxFrames.Load())
	}
}

// A frame larger than the read buffer is counted and dropped; the next one is read whole.
func TestTAPShortBufferDrops(t *testing.T) {
	ns, d, path := setup(t)
	var c *net.UDPConn
	if err := ns.Do(func() (err error) {
		c, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(path.Src.IP, 9)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(make([]byte, 1000))
	c.Write(make([]byte, 10))
	bufs := [][]byte{make([]byte, 200)}
	sizes := make([]int, 1)
	offs := make([]netdev.Offload, 1)
	if n, err := d.Read(bufs, sizes, offs); err != nil || n != 1 || sizes[0] != 14+20+8+10 {
		t.Fatalf("read %d frames (%d bytes): %v", n, sizes[0], err)
	}
	if d.Stats.RxDropped.Load() != 1 {
		t.Fatalf("RxDropped %d, want 1", d.Stats.RxDropped.Load())
	}
}

// FromFile takes over a descriptor (as a component gets it from the supervisor); closing the
// last descriptor deletes the TAP, and a blocked Read returns os.ErrClosed.
func TestTAPFromFileAndClose(t *testing.T) {
	ns, d, _ := setup(t)
	d2, err := FromFile(d.File())
	if err != nil {
		t.Fatal(err)
	}
	if d2.Name() != "nstap0" {
		t.Fatalf("name %q", d2.Name())
	}
	d.Close()
	done := make(chan error, 1)
	go func() {
		_, err := d2.Read([][]byte{make([]byte, netdev.MaxFrame)}, make([]int, 1), make([]netdev.Offload, 1))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	d2.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("Read after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not return after Close")
	}
	out, err := ns.Exec("ip", "-o", "link", "show", "type", "tun")
	if err != nil || strings.Contains(string(out), "nstap0") {
		t.Fatalf("TAP still there after the last close: %s %v", out, err)
	}
}

// Deleting the TAP under a waiting Read ends the Read with an error instead of a hang.
func TestTAPDeletedUnderRead(t *testing.T) {
	ns, d, _ := setup(t)
	done := make(chan error, 1)
	go func() {
		_, err := d.Read([][]byte{make([]byte, netdev.MaxFrame)}, make([]int, 1), make([]netdev.Offload, 1))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := ns.IP("link", "del", "nstap0"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Read returned no error")
		}
		t.Logf("Read after delete: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not return after the TAP was deleted")
	}
}

// A process without privileges drives a TAP someone else created, as linux_nic will with the
// descriptor the supervisor hands over.
func TestTAPUnprivilegedFromFile(t *testing.T) {
	if backendtest.InChild() {
		d, err := FromFile(os.NewFile(3, "tap"))
		if err != nil {
			t.Fatal(err)
		}
		backendtest.Echo(t, d, netdev.MaxFrame)
		return
	}
	ns, d, path := setup(t)
	backendtest.RunUnprivileged(t, "TestTAPUnprivilegedFromFile", d.File())
	backendtest.ExpectEcho(t, ns, path)
}
