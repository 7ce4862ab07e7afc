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
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
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

// DialContext opens a TCP connection or a connected UDP socket to address ("ip:port" or
// "[ipv6]:port"; no name resolution), with o set before it connects. network is "tcp" or
// "udp", or with 4 or 6 appended to insist on the address's family.
func (s *Stack) DialContext(ctx context.Context, network, address string, o iperf.Options) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, fmt.Errorf("netstack: %w", err)
	}
	proto, family, err := splitNetwork(network)
	if err != nil {
		return nil, err
	}
	to, netProto := fullAddress(ap.Addr(), ap.Port())
	if (family == '4' && netProto != ipv4.ProtocolNumber) || (family == '6' && netProto != ipv6.ProtocolNumber) {
		return nil, fmt.Errorf("netstack: dial %s %v: address of the other family", network, ap.Addr())
	}
	var wq waiter.Queue
	isTCP := proto == "tcp"
	transport := udp.ProtocolNumber
	if isTCP {
		transport = tcp.ProtocolNumber
	}
	ep, terr := s.s.NewEndpoint(transport, netProto, &wq)
	if terr != nil {
		return nil, errors.New(terr.String())
	}
	if err := s.setOptions(ep, isTCP, o); err != nil {
		ep.Close()
		return nil, err
	}
	if isTCP {
		if err := connect(ctx, ep, &wq, to); err != nil {
			ep.Close()
			return nil, &net.OpError{Op: "dial", Net: network, Addr: net.TCPAddrFromAddrPort(ap), Err: err}
		}
		return &tcpConn{gonet.NewTCPConn(&wq, ep), ep}, nil
	}
	if terr := ep.Connect(to); terr != nil {
		ep.Close()
		return nil, &net.OpError{Op: "dial", Net: network, Addr: net.UDPAddrFromAddrPort(ap), Err: errors.New(terr.String())}
	}
	return &udpConn{gonet.NewUDPConn(&wq, ep), ep}, nil
}

// splitNetwork reads "tcp", "udp", "tcp4", "udp6"... as the protocol and the family (0 for
// either).
func splitNetwork(network string) (string, byte, error) {
	proto, family := network, byte(0)
	if n := len(network); n > 0 && (network[n-1] == '4' || network[n-1] == '6') {
		proto, family = network[:n-1], network[n-1]
	}
	if proto != "tcp" && proto != "udp" {
		return "", 0, fmt.Errorf("netstack: network %q not supported", network)
	}
	return proto, family, nil
}

// fullAddress is a on the interface, as gVisor addresses it: an IPv4 address (or an
// IPv4-mapped one) as IPv4, any other as IPv6; a zone is ignored, as there is one interface.
func fullAddress(a netip.Addr, port uint16) (tcpip.FullAddress, tcpip.NetworkProtocolNumber) {
	if a.Unmap().Is4() {
		return tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFrom4(a.Unmap().As4()), Port: port}, ipv4.ProtocolNumber
	}
	return tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFrom16(a.As16()), Port: port}, ipv6.ProtocolNumber
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

// Listen accepts TCP connections on address ("ip:port", or ":port" for any address), as Go's
// net.Listen: "tcp" on ":port" or "[::]:port" takes both families, "0.0.0.0:port" and "tcp4"
// IPv4 only, "tcp6" IPv6 only.
func (s *Stack) Listen(network, address string) (net.Listener, error) {
	if proto, _, err := splitNetwork(network); err != nil || proto != "tcp" {
		return nil, fmt.Errorf("netstack: network %q not supported", network)
	}
	l := &listener{stack: s, cancel: make(chan struct{})}
	ep, err := s.bind(tcp.ProtocolNumber, network, address, &l.wq)
	if err != nil {
		return nil, err
	}
	if terr := ep.Listen(4096); terr != nil {
		ep.Close()
		return nil, fmt.Errorf("netstack: listen %s: %s", address, terr)
	}
	l.ep = ep
	return l, nil
}

// ListenPacket opens an unconnected UDP socket on address, of the families Listen's would take.
func (s *Stack) ListenPacket(network, address string) (net.PacketConn, error) {
	if proto, _, err := splitNetwork(network); err != nil || proto != "udp" {
		return nil, fmt.Errorf("netstack: network %q not supported", network)
	}
	var wq waiter.Queue
	ep, err := s.bind(udp.ProtocolNumber, network, address, &wq)
	if err != nil {
		return nil, err
	}
	return &udpConn{gonet.NewUDPConn(&wq, ep), ep}, nil
}

// bind makes an endpoint of transport bound to address, of the family network and address
// ask for: IPv4, IPv6 only, or both (an IPv6 endpoint that takes IPv4 too).
func (s *Stack) bind(transport tcpip.TransportProtocolNumber, network, address string, wq *waiter.Queue) (tcpip.Endpoint, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("netstack: %w", err)
	}
	port, err := net.LookupPort("tcp", portStr)
	if err != nil {
		return nil, fmt.Errorf("netstack: %w", err)
	}
	_, family, _ := splitNetwork(network)
	at := tcpip.FullAddress{NIC: nicID, Port: uint16(port)}
	netProto, v6only := ipv6.ProtocolNumber, family == '6'
	if family == '4' {
		netProto = ipv4.ProtocolNumber
	}
	if host != "" {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return nil, fmt.Errorf("netstack: listen address %q: %w", host, err)
		}
		switch {
		case a.Unmap().Is4() && family == '6', !a.Unmap().Is4() && family == '4':
			return nil, fmt.Errorf("netstack: listen %s %s: address of the other family", network, address)
		case a.Unmap().Is4():
			netProto = ipv4.ProtocolNumber
			if !a.Unmap().IsUnspecified() {
				at.Addr = tcpip.AddrFrom4(a.Unmap().As4())
			}
		case !a.IsUnspecified():
			at.Addr, v6only = tcpip.AddrFrom16(a.As16()), true
		}
	}
	ep, terr := s.s.NewEndpoint(transport, netProto, wq)
	if terr != nil {
		return nil, errors.New(terr.String())
	}
	if netProto == ipv6.ProtocolNumber {
		ep.SocketOptions().SetV6Only(v6only)
	}
	if terr := ep.Bind(at); terr != nil {
		ep.Close()
		return nil, fmt.Errorf("netstack: bind %s: %s", address, terr)
	}
	return ep, nil
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
		sock.MSS = s.mss(ep)
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
		opt := tcpip.IPv4TOSOption
		if isIPv6(ep) {
			opt = tcpip.IPv6TrafficClassOption
		}
		if terr := ep.SetSockOptInt(opt, o.TOS); terr != nil {
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

// mss is the segment size TCP sends at most on ep: what the link's MTU leaves after the IP
// (IPv4's or IPv6's) and TCP headers (gVisor does not report the negotiated one, nor -M once
// connected).
func (s *Stack) mss(ep tcpip.Endpoint) int {
	if isIPv6(ep) {
		return int(s.link.mtu) - 40 - 20
	}
	return int(s.link.mtu) - 20 - 20
}

// isIPv6 says whether ep's traffic is IPv6: an IPv6 endpoint, unless it is a dual-stack one's
// connection over IPv4.
func isIPv6(ep tcpip.Endpoint) bool {
	info, ok := ep.Info().(*stack.TransportEndpointInfo)
	if !ok || info.NetProto != ipv6.ProtocolNumber {
		return false
	}
	return info.ID.LocalAddress.Len() != 4
}

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
	ti := iperf.TCPInfo{SndCwnd: uint64(info.SndCwnd) * uint64(s.mss(tc.ep)), RTT: uint32(info.RTT.Microseconds()),
		RTTVar: uint32(info.RTTVar.Microseconds()), PMTU: s.link.mtu}
	if st, ok := tc.ep.Stats().(*tcp.Stats); ok {
		ti.Retransmits = st.SendErrors.Retransmits.Value()
	}
	return ti, nil
}
