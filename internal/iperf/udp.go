package iperf

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// A UDP data stream opens with a handshake: the client sends one 4-byte datagram, the server
// answers with another from the address the test then uses. iperf3 writes both as host-order
// integers (UDP_CONNECT_MSG 0x36373839, UDP_CONNECT_REPLY 0x39383736); on the little-endian
// hosts it runs on, these are the bytes below. Older servers answer 987654321.
var (
	udpConnectMsg   = []byte{0x39, 0x38, 0x37, 0x36}
	udpConnectReply = []byte{0x36, 0x37, 0x38, 0x39}
)

func isConnectReply(b []byte) bool {
	if len(b) != 4 {
		return false
	}
	v := binary.LittleEndian.Uint32(b)
	return v == 0x39383736 || v == 987654321
}

// udpConnectWait is how long a client waits for the server's answer (iperf3's SO_RCVTIMEO).
const udpConnectWait = 30 * time.Second

// udpHandshake announces a client's UDP stream to the server and waits for its answer. A
// reverse test may see a first data datagram overtake the answer; iperf3 lets two pass.
func udpHandshake(ctx context.Context, c net.Conn, blockSize int) error {
	if _, err := c.Write(udpConnectMsg); err != nil {
		return fail(CodeStreamWrite, err)
	}
	deadline := time.Now().Add(udpConnectWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetReadDeadline(deadline)
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, max(blockSize, 4))
	for range 3 {
		n, err := c.Read(buf)
		if err != nil {
			return fail(CodeStreamRead, err)
		}
		if isConnectReply(buf[:n]) {
			return nil
		}
	}
	return &Error{Code: CodeStreamRead, Err: errors.New("the server did not answer the UDP stream's handshake")}
}

// epoch is where the UDP header's clock counts from: like iperf3's CLOCK_MONOTONIC it never
// steps, and a receiver uses only differences of it.
var epoch = time.Now()

// The UDP header iperf3 puts in every datagram: the send time in seconds and microseconds,
// then the datagram's sequence number (from 1), 32 or 64 bits, all big-endian.
func putUDPHeader(b []byte, now time.Duration, seq uint64, u64 bool) {
	binary.BigEndian.PutUint32(b, uint32(now/time.Second))
	binary.BigEndian.PutUint32(b[4:], uint32(now%time.Second/time.Microsecond))
	if u64 {
		binary.BigEndian.PutUint64(b[8:], seq)
	} else {
		binary.BigEndian.PutUint32(b[8:], uint32(seq))
	}
}

func readUDPHeader(b []byte, u64 bool) (sent time.Duration, seq uint64, ok bool) {
	if len(b) < 12 || (u64 && len(b) < 16) {
		return 0, 0, false
	}
	sent = time.Duration(binary.BigEndian.Uint32(b))*time.Second + time.Duration(binary.BigEndian.Uint32(b[4:]))*time.Microsecond
	if u64 {
		seq = binary.BigEndian.Uint64(b[8:])
	} else {
		seq = uint64(binary.BigEndian.Uint32(b[8:]))
	}
	return sent, seq, true
}

func (s *stream) sendDatagrams() error {
	for !s.stop.Load() {
		seq := s.packets.Add(1) // counted even when the send fails: the receiver sees the gap
		putUDPHeader(s.buf, time.Since(epoch), seq, s.u64)
		n, err := s.conn.Write(s.buf)
		switch {
		case err == nil:
			s.count(n)
		case errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN):
			// The queue toward the wire is full: this datagram is lost, the next may go.
		default:
			return fail(CodeStreamWrite, err)
		}
		if !s.stop.Load() {
			s.pace.wait(s.bytes.Load())
		}
	}
	return nil
}

func (s *stream) receiveDatagrams() error {
	for {
		n, err := s.conn.Read(s.buf)
		if err != nil {
			return fail(CodeStreamRead, err)
		}
		s.datagram(s.buf[:n])
	}
}

// datagram counts one received datagram.
func (s *stream) datagram(b []byte) {
	sent, seq, ok := readUDPHeader(b, s.u64)
	if !ok {
		return // a handshake datagram, or not iperf's
	}
	s.count(len(b))
	s.rx.add(sent, seq, time.Since(epoch))
}

// udpReceiver is iperf3's accounting of a UDP stream's arrivals (iperf_udp_recv): the highest
// sequence number seen, gaps counted as lost until a late datagram fills one (then it is out of
// order instead), and RFC 1889's interarrival jitter.
type udpReceiver struct {
	mu          sync.Mutex
	highest     int64
	lost, ooo   int64
	jitter      float64 // seconds
	prevTransit float64
	started     bool
}

func (r *udpReceiver) add(sent time.Duration, seq uint64, arrived time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pc := int64(seq)
	if pc >= r.highest+1 {
		if pc > r.highest+1 {
			r.lost += pc - 1 - r.highest
		}
		r.highest = pc
	} else {
		r.ooo++
		if r.lost > 0 {
			r.lost--
		}
	}
	// Only differences of transit times count, so the two hosts' clocks need not agree.
	transit := (arrived - sent).Seconds()
	if !r.started {
		r.prevTransit, r.started = transit, true
	}
	d := transit - r.prevTransit
	if d < 0 {
		d = -d
	}
	r.prevTransit = transit
	r.jitter += (d - r.jitter) / 16
}

func (r *udpReceiver) counts() (highest, lost, ooo int64, jitter float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.highest, r.lost, r.ooo, r.jitter
}

// restartJitter starts the jitter over, as iperf3 does when the omitted seconds end.
func (r *udpReceiver) restartJitter() {
	r.mu.Lock()
	r.jitter, r.started = 0, false
	r.mu.Unlock()
}

// udpPeer is a server's UDP stream: one client address on the test's shared socket. Writes go
// to the client; the socket's reader hands the client's datagrams to the stream.
type udpPeer struct {
	pc     net.PacketConn
	local  net.Addr
	remote *net.UDPAddr
}

func (p *udpPeer) Write(b []byte) (int, error) { return p.pc.WriteTo(b, p.remote) }
func (p *udpPeer) Read([]byte) (int, error) {
	return 0, errors.New("iperf: a server's UDP stream is fed by its socket")
}
func (p *udpPeer) Close() error                     { return nil } // the test closes the shared socket
func (p *udpPeer) LocalAddr() net.Addr              { return p.local }
func (p *udpPeer) RemoteAddr() net.Addr             { return p.remote }
func (p *udpPeer) SetDeadline(time.Time) error      { return nil }
func (p *udpPeer) SetReadDeadline(time.Time) error  { return nil }
func (p *udpPeer) SetWriteDeadline(time.Time) error { return nil }

// udpListener is a server test's UDP socket. It reads every datagram: from a new address while
// streams are expected, it is a stream's handshake (answered, and handed on to the test); from
// a receiving stream's address, data.
type udpListener struct {
	pc        net.PacketConn
	local     net.Addr // the address clients reach, for the streams' reports
	blockSize int
	newPeers  chan *udpPeer
	want      int // handshakes still expected; owned by the reader
	peers     map[netip.AddrPort]*stream
	register  chan registration
	done      chan struct{}
}

type registration struct {
	addr netip.AddrPort
	s    *stream
}

func newUDPListener(pc net.PacketConn, local net.Addr, streams, blockSize int) *udpListener {
	l := &udpListener{pc: pc, local: local, blockSize: blockSize, want: streams,
		newPeers: make(chan *udpPeer, streams), peers: make(map[netip.AddrPort]*stream),
		register: make(chan registration, streams), done: make(chan struct{})}
	go l.read()
	return l
}

// receive makes s the receiver of what its peer sends.
func (l *udpListener) receive(s *stream) {
	p := s.conn.(*udpPeer)
	l.register <- registration{addrPort(p.remote), s}
}

func (l *udpListener) read() {
	defer close(l.done)
	buf := make([]byte, max(l.blockSize, 4))
	for {
		n, from, err := readFrom(l.pc, buf)
		if err != nil {
			return // closed with the test
		}
		for drained := false; !drained; {
			select {
			case r := <-l.register:
				l.peers[r.addr] = r.s
			default:
				drained = true
			}
		}
		if s, ok := l.peers[from]; ok {
			s.datagram(buf[:n])
			continue
		}
		if l.want > 0 && n <= 4 {
			l.want--
			peer := &udpPeer{pc: l.pc, local: l.local, remote: net.UDPAddrFromAddrPort(from)}
			if _, err := peer.Write(udpConnectReply); err == nil {
				l.newPeers <- peer
			}
		}
	}
}

func (l *udpListener) close() {
	l.pc.Close()
	<-l.done
}

// readFrom reads a datagram and its sender without allocating where the socket allows it.
func readFrom(pc net.PacketConn, b []byte) (int, netip.AddrPort, error) {
	if u, ok := pc.(interface {
		ReadFromUDPAddrPort([]byte) (int, netip.AddrPort, error)
	}); ok {
		n, ap, err := u.ReadFromUDPAddrPort(b)
		return n, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), err
	}
	n, a, err := pc.ReadFrom(b)
	if err != nil {
		return 0, netip.AddrPort{}, err
	}
	ua, ok := a.(*net.UDPAddr)
	if !ok {
		return 0, netip.AddrPort{}, errors.New("iperf: not a UDP address")
	}
	return n, addrPort(ua), nil
}

func addrPort(a *net.UDPAddr) netip.AddrPort {
	ap := a.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
