package netstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/nicstack/nicstack/internal/iperf"
)

// The stack is an iperf.Network: the embedded guests measure with the same iperf over it as
// `nicstack iperf` over the host's sockets. Its connections keep their gVisor endpoint, where
// socket options and TCP's state live.
var _ iperf.Network = (*Stack)(nil)

type tcpConn struct {
	*gonet.TCPConn
	ep tcpip.Endpoint
}

// Read and Write name a failed connection's error by its errno, as a kernel socket's: gonet
// passes tcpip's errors on as text, and iperf reports the errno (a timeout of --snd-timeout
// is ETIMEDOUT).
func (c *tcpConn) Read(b []byte) (int, error) {
	n, err := c.TCPConn.Read(b)
	return n, withErrno(err)
}

func (c *tcpConn) Write(b []byte) (int, error) {
	n, err := c.TCPConn.Write(b)
	return n, withErrno(err)
}

// errnos are the tcpip errors of a connection that failed, by their text.
var errnos = map[string]syscall.Errno{
	(&tcpip.ErrTimeout{}).String():            syscall.ETIMEDOUT,
	(&tcpip.ErrConnectionReset{}).String():    syscall.ECONNRESET,
	(&tcpip.ErrConnectionAborted{}).String():  syscall.ECONNABORTED,
	(&tcpip.ErrHostUnreachable{}).String():    syscall.EHOSTUNREACH,
	(&tcpip.ErrNetworkUnreachable{}).String(): syscall.ENETUNREACH,
}

func withErrno(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		if e, ok := errnos[op.Err.Error()]; ok {
			op.Err = e
		}
	}
	return err
}

type udpConn struct {
	*gonet.UDPConn
	ep tcpip.Endpoint
}

// endpointOf finds the gVisor endpoint under a connection this stack made.
func endpointOf(c any) (tcpip.Endpoint, bool, error) {
	switch c := c.(type) {
	case *tcpConn:
		return c.ep, true, nil
	case *udpConn:
		return c.ep, false, nil
	}
	return nil, false, fmt.Errorf("netstack: %T is not a connection of this stack", c)
}

// DialContext opens a TCP connection or a connected UDP socket to address ("ip:port"; no name
// resolution), with o set before it connects.
func (s *Stack) DialContext(ctx context.Context, network, address string, o iperf.Options) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, fmt.Errorf("netstack: %w", err)
	}
	if !ap.Addr().Unmap().Is4() {
		return nil, fmt.Errorf("netstack: %v is not IPv4", ap.Addr())
	}
	to := tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFrom4(ap.Addr().Unmap().As4()), Port: ap.Port()}
	var wq waiter.Queue
	switch network {
	case "tcp", "tcp4":
		ep, terr := s.s.NewEndpoint(tcp.ProtocolNumber, ipv4.ProtocolNumber, &wq)
		if terr != nil {
			return nil, errors.New(terr.String())
		}
		if err := s.setOptions(ep, true, o); err != nil {
			ep.Close()
			return nil, err
		}
		if err := connect(ctx, ep, &wq, to); err != nil {
			ep.Close()
			return nil, &net.OpError{Op: "dial", Net: network, Addr: net.TCPAddrFromAddrPort(ap), Err: err}
		}
		return &tcpConn{gonet.NewTCPConn(&wq, ep), ep}, nil
	case "udp", "udp4":
		ep, terr := s.s.NewEndpoint(udp.ProtocolNumber, ipv4.ProtocolNumber, &wq)
		if terr != nil {
			return nil, errors.New(terr.String())
		}
		if err := s.setOptions(ep, false, o); err != nil {
			ep.Close()
			return nil, err
		}
		if terr := ep.Connect(to); terr != nil {
			ep.Close()
			return nil, &net.OpError{Op: "dial", Net: network, Addr: net.UDPAddrFromAddrPort(ap), Err: errors.New(terr.String())}
		}
		return &udpConn{gonet.NewUDPConn(&wq, ep), ep}, nil
	}
	return nil, fmt.Errorf("netstack: network %q not supported", network)
}

// connect opens a TCP connection on ep, waiting for the handshake or ctx.
func connect(ctx context.Context, ep tcpip.Endpoint, wq *waiter.Queue, to tcpip.FullAddress) error {
	entry, ready := waiter.NewChannelEntry(waiter.WritableEvents)
	wq.EventRegister(&entry)
	defer wq.EventUnregister(&entry)
	terr := ep.Connect(to)
	if _, started := terr.(*tcpip.ErrConnectStarted); started {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ready:
		}
		terr = ep.LastError()
	}
	if terr != nil {
		return errors.New(terr.String())
	}
	return nil
}

// Listen accepts TCP connections on address ("ip:port" or ":port" for any address).
func (s *Stack) Listen(network, address string) (net.Listener, error) {
	if network != "tcp" && network != "tcp4" {
		return nil, fmt.Errorf("netstack: network %q not supported", network)
	}
	at, err := bindAddress(address)
	if err != nil {
		return nil, err
	}
	l := &listener{stack: s, cancel: make(chan struct{})}
	ep, terr := s.s.NewEndpoint(tcp.ProtocolNumber, ipv4.ProtocolNumber, &l.wq)
	if terr != nil {
		return nil, errors.New(terr.String())
	}
	if terr := ep.Bind(at); terr != nil {
		ep.Close()
		return nil, fmt.Errorf("netstack: bind %s: %s", address, terr)
	}
	if terr := ep.Listen(4096); terr != nil {
		ep.Close()
		return nil, fmt.Errorf("netstack: listen %s: %s", address, terr)
	}
	l.ep = ep
	return l, nil
}

// ListenPacket opens an unconnected UDP socket on address ("ip:port" or ":port").
func (s *Stack) ListenPacket(network, address string) (net.PacketConn, error) {
	if network != "udp" && network != "udp4" {
		return nil, fmt.Errorf("netstack: network %q not supported", network)
	}
	at, err := bindAddress(address)
	if err != nil {
		return nil, err
	}
	var wq waiter.Queue
	ep, terr := s.s.NewEndpoint(udp.ProtocolNumber, ipv4.ProtocolNumber, &wq)
	if terr != nil {
		return nil, errors.New(terr.String())
	}
	if terr := ep.Bind(at); terr != nil {
		ep.Close()
		return nil, fmt.Errorf("netstack: bind %s: %s", address, terr)
	}
	return &udpConn{gonet.NewUDPConn(&wq, ep), ep}, nil
}

func bindAddress(address string) (tcpip.FullAddress, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return tcpip.FullAddress{}, fmt.Errorf("netstack: %w", err)
	}
	port, err := net.LookupPort("tcp", portStr)
	if err != nil {
		return tcpip.FullAddress{}, fmt.Errorf("netstack: %w", err)
	}
	fa := tcpip.FullAddress{NIC: nicID, Port: uint16(port)}
	if host != "" && host != "0.0.0.0" && host != "::" {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Unmap().Is4() {
			return fa, fmt.Errorf("netstack: listen address %q is not IPv4", host)
		}
		fa.Addr = tcpip.AddrFrom4(a.Unmap().As4())
	}
	return fa, nil
}

// listener accepts like gonet's, but keeps each connection's endpoint.
type listener struct {
	stack  *Stack
	ep     tcpip.Endpoint
	wq     waiter.Queue
	cancel chan struct{}
}

func (l *listener) Accept() (net.Conn, error) {
	entry, ready := waiter.NewChannelEntry(waiter.ReadableEvents)
	l.wq.EventRegister(&entry)
	defer l.wq.EventUnregister(&entry)
	for {
		ep, wq, terr := l.ep.Accept(nil)
		if _, wait := terr.(*tcpip.ErrWouldBlock); !wait {
			if terr != nil {
				return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: errors.New(terr.String())}
			}
			return &tcpConn{gonet.NewTCPConn(wq, ep), ep}, nil
		}
		select {
		case <-l.cancel:
			return nil, net.ErrClosed
		case <-ready:
		}
	}
}

func (l *listener) Close() error {
	select {
	case <-l.cancel:
	default:
		close(l.cancel)
		l.ep.Close()
	}
	return nil
}

func (l *listener) Addr() net.Addr {
	a, err := l.ep.GetLocalAddress()
	if err != nil {
		return nil
	}
	return &net.TCPAddr{IP: net.IP(a.Addr.AsSlice()), Port: int(a.Port)}
}

// Tune sets o on a connection or packet connection of this stack, and reports its socket.
func (s *Stack) Tune(c any, o iperf.Options) (iperf.Socket, error) {
	ep, isTCP, err := endpointOf(c)
	if err != nil {
		return iperf.Socket{}, err
	}
	if err := s.setOptions(ep, isTCP, o); err != nil {
		return iperf.Socket{}, err
	}
	ops := ep.SocketOptions()
	sock := iperf.Socket{SndBuf: int(ops.GetSendBufferSize()), RcvBuf: int(ops.GetReceiveBufferSize())}
	if isTCP {
		sock.MSS = s.mss()
		var cc tcpip.CongestionControlOption
		if ep.GetSockOpt(&cc) == nil {
			sock.Congestion = string(cc)
		}
	}
	return sock, nil
}

// setOptions sets what o asks for, each failure as iperf3's code for it. Buffer sizes are set
// as Linux reports them, doubled.
func (s *Stack) setOptions(ep tcpip.Endpoint, isTCP bool, o iperf.Options) error {
	ops := ep.SocketOptions()
	if isTCP && o.NoDelay {
		ops.SetDelayOption(false)
	}
	if isTCP && o.MSS > 0 {
		if terr := ep.SetSockOptInt(tcpip.MaxSegOption, o.MSS); terr != nil {
			return &iperf.Error{Code: iperf.CodeSetMSS, Errno: syscall.EINVAL, Err: errors.New(terr.String())}
		}
	}
	if o.Window > 0 {
		ops.SetReceiveBufferSize(int64(o.Window)*2, true)
		ops.SetSendBufferSize(int64(o.Window)*2, true)
	}
	if o.TOS > 0 {
		if terr := ep.SetSockOptInt(tcpip.IPv4TOSOption, o.TOS); terr != nil {
			return &iperf.Error{Code: iperf.CodeSetTOS, Errno: syscall.EINVAL, Err: errors.New(terr.String())}
		}
	}
	if isTCP && o.UserTimeout > 0 {
		ut := tcpip.TCPUserTimeoutOption(o.UserTimeout)
		if terr := ep.SetSockOpt(&ut); terr != nil {
			return &iperf.Error{Code: iperf.CodeUserTimeout, Errno: syscall.EINVAL, Err: errors.New(terr.String())}
		}
	}
	if isTCP && o.Congestion != "" {
		cc := tcpip.CongestionControlOption(o.Congestion)
		if terr := ep.SetSockOpt(&cc); terr != nil {
			errno := syscall.EINVAL
			if _, missing := terr.(*tcpip.ErrNoSuchFile); missing {
				errno = syscall.ENOENT
			}
			return &iperf.Error{Code: iperf.CodeSetCongestion, Errno: errno}
		}
	}
	return nil
}

// mss is the segment size TCP sends at most: what the link's MTU leaves after the IPv4 and
// TCP headers (gVisor does not report the negotiated one, nor -M once connected).
func (s *Stack) mss() int { return int(s.link.mtu) - 20 - 20 }

// TCPInfo reads a TCP connection's state from its gVisor endpoint, in TCP_INFO's terms: gVisor
// counts the congestion window in segments, and keeps no copy of the peer's window (SndWnd 0).
func (s *Stack) TCPInfo(c net.Conn) (iperf.TCPInfo, error) {
	tc, ok := c.(*tcpConn)
	if !ok {
		return iperf.TCPInfo{}, fmt.Errorf("netstack: %T is not a TCP connection of this stack", c)
	}
	var info tcpip.TCPInfoOption
	if terr := tc.ep.GetSockOpt(&info); terr != nil {
		return iperf.TCPInfo{}, errors.New(terr.String())
	}
	ti := iperf.TCPInfo{SndCwnd: uint64(info.SndCwnd) * uint64(s.mss()), RTT: uint32(info.RTT.Microseconds()),
		RTTVar: uint32(info.RTTVar.Microseconds()), PMTU: s.link.mtu}
	if st, ok := tc.ep.Stats().(*tcp.Stats); ok {
		ti.Retransmits = st.SendErrors.Retransmits.Value()
	}
	return ti, nil
}
