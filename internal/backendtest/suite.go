package backendtest

import (
	"bytes"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/netns"
)

// Env is one back end under test, facing the kernel stack of namespace Kernel.
type Env struct {
	Dev       netdev.Device
	MaxFrame  int           // read buffer size
	Kernel    *netns.NS     // the namespace whose stack is the peer
	Path      Path          // Src: the host the test plays behind Dev; Dst: the kernel's interface
	TxDropped func() uint64 // the back end's count of frames dropped on write
}

// Namespace creates a namespace deleted when t ends (also when it fails). It skips t (fails it
// under CI) unless root.
func Namespace(t testing.TB, label string) *netns.NS {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "ip")
	n, err := netns.New(label)
	if err != nil {
		t.Fatalf("netns: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("netns: %v", err)
		}
	})
	return n
}

// MAC returns the hardware address of dev in namespace n.
func MAC(t testing.TB, n *netns.NS, dev string) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	if err := n.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err == nil {
			mac = ifi.HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return mac
}

// Run runs the shared subtests: ICMP, UDP and TCP from the kernel, UDP and TCP to it, TCP
// super-frames both ways, and a malformed frame in a batch. The caller has configured Path.Dst
// on the kernel's interface and a static neighbour entry for Path.Src.
func Run(t *testing.T, e Env) {
	done := make(chan struct{})
	rx := make(chan Packet, 4096)
	go e.reader(rx, done)
	t.Cleanup(func() { close(done) }) // before the caller's cleanup closes the device
	t.Run("ICMPFromKernel", func(t *testing.T) { e.icmpFromKernel(t, rx) })
	t.Run("UDPFromKernel", func(t *testing.T) { e.udpFromKernel(t, rx) })
	t.Run("UDPToKernelWithMalformed", func(t *testing.T) { e.udpToKernel(t) })
	t.Run("TCPSuperFramesBothWays", func(t *testing.T) { e.tcpBothWays(t, rx) })
}

// reader copies every IPv4 frame the device reads to rx, until the device is closed.
func (e Env) reader(rx chan<- Packet, done <-chan struct{}) {
	const batch = 32
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = make([]byte, e.MaxFrame)
	}
	sizes := make([]int, batch)
	offs := make([]netdev.Offload, batch)
	for {
		n, err := e.Dev.Read(bufs, sizes, offs)
		for i := 0; i < n; i++ {
			p, ok := Parse(bytes.Clone(bufs[i][:sizes[i]]), offs[i])
			if !ok {
				continue
			}
			select {
			case rx <- p:
			case <-done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// expect returns the next packet from rx that match accepts, failing t after 5 s.
func expect(t *testing.T, rx <-chan Packet, what string, match func(Packet) bool) Packet {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case p := <-rx:
			if match(p) {
				return p
			}
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (e Env) write(t *testing.T, frames [][]byte, offs []netdev.Offload) {
	t.Helper()
	if n, err := e.Dev.Write(frames, offs); err != nil || n != len(frames) {
		t.Fatalf("Write: %d of %d frames, %v", n, len(frames), err)
	}
}

func (e Env) icmpFromKernel(t *testing.T, rx <-chan Packet) {
	var c net.PacketConn
	if err := e.Kernel.Do(func() (err error) {
		c, err = net.ListenPacket("ip4:icmp", e.Path.Dst.IP.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := []byte{8, 0, 0, 0, 0x12, 0x34, 0, 1, 'n', 'i', 'c', 's', 't', 'a', 'c', 'k'}
	header.ICMP(msg).UpdateChecksum()
	if _, err := c.WriteTo(msg, &net.IPAddr{IP: e.Path.Src.IP.AsSlice()}); err != nil {
		t.Fatal(err)
	}
	p := expect(t, rx, "ICMP echo request", func(p Packet) bool { return p.Proto == header.ProtoICMP && p.Type == header.ICMPEchoRequest })
	if !p.ChecksumOK || p.Off != (netdev.Offload{}) || !bytes.Equal(p.Payload, msg[8:]) {
		t.Fatalf("echo request: checksum ok %v, offload %+v, payload %q", p.ChecksumOK, p.Off, p.Payload)
	}
}

func (e Env) udpFromKernel(t *testing.T, rx <-chan Packet) {
	var c *net.UDPConn
	dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(e.Path.Src.IP, 7001))
	if err := e.Kernel.Do(func() (err error) {
		c, err = net.DialUDP("udp4", nil, dst)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, size := range []int{1, 1000, 1400} {
		msg := bytes.Repeat([]byte{byte(size)}, size)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		p := expect(t, rx, "UDP datagram", func(p Packet) bool { return p.Proto == header.ProtoUDP && p.DPort == 7001 })
		if !bytes.Equal(p.Payload, msg) || !p.ChecksumOK {
			t.Fatalf("%d-byte datagram: got %d bytes, checksum ok %v", size, len(p.Payload), p.ChecksumOK)
		}
		if p.Off.Flags&netdev.OffloadNeedsCsum != 0 && (p.Off.CsumStart != l4Start || p.Off.CsumOffset != 6) {
			t.Fatalf("NEEDS_CSUM at %d+%d, want %d+6", p.Off.CsumStart, p.Off.CsumOffset, l4Start)
		}
		t.Logf("%d-byte datagram: offload %+v", size, p.Off)
	}
}

// ListenUDP opens a UDP socket on ip:port inside namespace n.
func ListenUDP(n *netns.NS, ip netip.Addr, port uint16) (c *net.UDPConn, err error) {
	err = n.Do(func() error {
		c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, port)))
		return err
	})
	return c, err
}

func (e Env) udpToKernel(t *testing.T) {
	c, err := ListenUDP(e.Kernel, e.Path.Dst.IP, 7002)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// One batch: full and partial checksums, and a frame whose checksum field lies past its end.
	var frames [][]byte
	var offs []netdev.Offload
	for i := 0; i < 16; i++ {
		f, o := e.Path.UDP(7000, 7002, []byte{'d', 'g', byte(i)}, i%2 == 1)
		frames, offs = append(frames, f), append(offs, o)
		if i == 7 {
			bad, _ := e.Path.UDP(7000, 7002, []byte("bad"), false)
			frames = append(frames, bad)
			offs = append(offs, netdev.Offload{Flags: netdev.OffloadNeedsCsum, CsumStart: uint16(len(bad)), CsumOffset: 6})
		}
	}
	before := e.TxDropped()
	e.write(t, frames, offs)
	if d := e.TxDropped() - before; d != 1 {
		t.Errorf("TxDropped grew by %d, want 1", d)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	for i := 0; i < 16; i++ {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if want := []byte{'d', 'g', byte(i)}; !bytes.Equal(buf[:n], want) {
			t.Fatalf("datagram %d: %q, want %q", i, buf[:n], want)
		}
	}
}

// tcpBothWays plays a TCP peer by hand: handshake, a 40000-byte GSO super-frame to the kernel,
// then 200000 bytes from the kernel acknowledged segment by segment, expecting TSO frames.
func (e Env) tcpBothWays(t *testing.T, rx <-chan Packet) {
	const port, ours, mss = 7003, 40000, 1460
	var ln *net.TCPListener
	if err := e.Kernel.Do(func() (err error) {
		ln, err = net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(netip.AddrPortFrom(e.Path.Dst.IP, port)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.TCPConn, 1)
	go func() {
		c, err := ln.AcceptTCP()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	fromUs := func(p Packet) bool { return p.Proto == header.ProtoTCP && p.SPort == port && p.DPort == ours }
	seq := uint32(1000)
	f, o := e.Path.TCP(ours, port, seq, 0, header.TCPSyn, MSSOption(mss), nil, 0)
	e.write(t, [][]byte{f}, []netdev.Offload{o})
	synack := expect(t, rx, "SYN-ACK", fromUs)
	if synack.Flags&(header.TCPSyn|header.TCPAck) != header.TCPSyn|header.TCPAck || synack.Ack != seq+1 || !synack.ChecksumOK {
		t.Fatalf("SYN-ACK: flags %#x ack %d checksum ok %v", synack.Flags, synack.Ack, synack.ChecksumOK)
	}
	seq++
	peer := synack.Seq + 1

	// To the kernel: ACK, then one super-frame that the kernel must take as 28 segments' worth.
	data := make([]byte, 40000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	ack, _ := e.Path.TCP(ours, port, seq, peer, header.TCPAck, nil, nil, 0)
	super, so := e.Path.TCP(ours, port, seq, peer, header.TCPAck|header.TCPPsh, nil, data, mss)
	e.write(t, [][]byte{ack, super}, []netdev.Offload{{}, so})
	seq += uint32(len(data))
	conn, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(data))
	if _, err := io.ReadFull(conn, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("kernel received %d bytes intact %v: %v", len(got), bytes.Equal(got, data), err)
	}
	// Then a burst of full-size segments with complete checksums in one write, the last one
	// short and with PSH (a TAP joins such runs into super-frames), and one with a bad
	// checksum in the middle, which the kernel must drop and not take into a joined frame.
	var burst [][]byte
	for i := 0; i < 30; i++ {
		n := mss
		if i == 29 {
			n = 100
		}
		flags := byte(header.TCPAck)
		if i == 29 {
			flags |= header.TCPPsh
		}
		f, _ := e.Path.TCP(ours, port, seq, peer, flags, nil, data[:n], 0)
		burst = append(burst, f)
		seq += uint32(n)
	}
	bad, _ := e.Path.TCP(ours, port, seq, peer, header.TCPAck, nil, data[:mss], 0)
	bad[len(bad)-1]++
	e.write(t, append(burst, bad), nil)
	want := 29*mss + 100
	got = make([]byte, want)
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("kernel received a burst of 30 segments: %v", err)
	}
	for i := 0; i < 30; i++ {
		n := min(mss, want-i*mss)
		if !bytes.Equal(got[i*mss:i*mss+n], data[:n]) {
			t.Fatalf("segment %d of the burst corrupted", i)
		}
	}

	// From the kernel: acknowledge in order; TSO should hand over frames larger than the MTU.
	out := make([]byte, 200000)
	for i := range out {
		out[i] = byte(i * 13)
	}
	go conn.Write(out)
	var recv []byte
	var supers int
	for len(recv) < len(out) {
		p := expect(t, rx, "data from the kernel", fromUs)
		if len(p.Payload) == 0 {
			continue
		}
		if p.Off.GSOType != netdev.GSONone {
			supers++
			if p.Off.GSOType != netdev.GSOTCPv4 || p.Off.GSOSize != mss || p.Off.Flags&netdev.OffloadNeedsCsum == 0 ||
				p.Off.CsumStart != l4Start || p.Off.CsumOffset != 16 || p.Off.HdrLen != l4Start+20 {
				t.Fatalf("super-frame of %d bytes with offload %+v", len(p.Frame), p.Off)
			}
		} else if !p.ChecksumOK {
			t.Fatalf("segment of %d bytes with a bad checksum, offload %+v", len(p.Frame), p.Off)
		}
		if p.Seq == peer {
			recv = append(recv, p.Payload...)
			peer += uint32(len(p.Payload))
		}
		a, _ := e.Path.TCP(ours, port, seq, peer, header.TCPAck, nil, nil, 0)
		e.write(t, [][]byte{a}, nil)
	}
	if !bytes.Equal(recv, out) {
		t.Fatal("data from the kernel corrupted")
	}
	if supers == 0 {
		t.Fatal("no super-frame from the kernel: TSO did not reach the back end")
	}
	t.Logf("from the kernel: %d bytes, %d super-frames", len(recv), supers)
	rst, _ := e.Path.TCP(ours, port, seq, peer, header.TCPRst|header.TCPAck, nil, nil, 0)
	e.write(t, [][]byte{rst}, nil)
}
