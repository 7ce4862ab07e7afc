package iperf

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Kernel is the host's own network stack.
var Kernel Network = kernelNetwork{}

type kernelNetwork struct{}

func (kernelNetwork) DialContext(ctx context.Context, network, address string, o Options) (net.Conn, error) {
	var setErr error
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		if err := c.Control(func(fd uintptr) { setErr = setOptions(int(fd), network, o) }); err != nil {
			return err
		}
		return setErr
	}}
	conn, err := d.DialContext(ctx, network, address)
	if setErr != nil {
		return nil, setErr // an *Error naming the option, not the dial that it aborted
	}
	return conn, err
}

func (kernelNetwork) Listen(network, address string) (net.Listener, error) {
	return net.Listen(network, address)
}

func (kernelNetwork) ListenPacket(network, address string) (net.PacketConn, error) {
	return net.ListenPacket(network, address)
}

func (kernelNetwork) Tune(c any, o Options) (Socket, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return Socket{}, fmt.Errorf("iperf: %T is not a kernel socket", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return Socket{}, err
	}
	var s Socket
	network := "tcp"
	if _, udp := c.(*net.UDPConn); udp {
		network = "udp"
	}
	var setErr error
	err = raw.Control(func(fd uintptr) {
		if setErr = setOptions(int(fd), network, o); setErr == nil {
			s = readSocket(int(fd), network)
		}
	})
	if err == nil {
		err = setErr
	}
	return s, err
}

// setOptions sets what o asks for in iperf3's order, each failure as the code iperf3 gives it.
func setOptions(fd int, network string, o Options) error {
	tcp := network == "tcp" || network == "tcp4" || network == "tcp6"
	set := func(code Code, level, opt, v int) error {
		if err := unix.SetsockoptInt(fd, level, opt, v); err != nil {
			return &Error{Code: code, Errno: err.(syscall.Errno)}
		}
		return nil
	}
	if tcp && o.NoDelay {
		if err := set(CodeSetNoDelay, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
			return err
		}
	}
	if tcp && o.MSS > 0 {
		if err := set(CodeSetMSS, unix.IPPROTO_TCP, unix.TCP_MAXSEG, o.MSS); err != nil {
			return err
		}
	}
	if o.Window > 0 {
		if err := set(CodeSetBuf, unix.SOL_SOCKET, unix.SO_RCVBUF, o.Window); err != nil {
			return err
		}
		if err := set(CodeSetBuf, unix.SOL_SOCKET, unix.SO_SNDBUF, o.Window); err != nil {
			return err
		}
	}
	if o.TOS > 0 {
		level, opt := unix.IPPROTO_IP, unix.IP_TOS
		if sa, err := unix.Getsockname(fd); err == nil {
			if _, v6 := sa.(*unix.SockaddrInet6); v6 {
				level, opt = unix.IPPROTO_IPV6, unix.IPV6_TCLASS
			}
		}
		if err := set(CodeSetTOS, level, opt, o.TOS); err != nil {
			return err
		}
	}
	if tcp && o.UserTimeout > 0 {
		if err := set(CodeUserTimeout, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(o.UserTimeout.Milliseconds())); err != nil {
			return err
		}
	}
	if tcp && o.Congestion != "" {
		if err := unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, o.Congestion); err != nil {
			return &Error{Code: CodeSetCongestion, Errno: err.(syscall.Errno)}
		}
	}
	return nil
}

func readSocket(fd int, network string) Socket {
	var s Socket
	s.SndBuf, _ = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	s.RcvBuf, _ = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	if network == "tcp" {
		s.MSS, _ = unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_MAXSEG)
		s.Congestion, _ = unix.GetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	}
	return s
}

func (kernelNetwork) TCPInfo(c net.Conn) (TCPInfo, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return TCPInfo{}, fmt.Errorf("iperf: %T is not a kernel socket", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return TCPInfo{}, err
	}
	var ti *unix.TCPInfo
	var getErr error
	if err := raw.Control(func(fd uintptr) {
		ti, getErr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		return TCPInfo{}, err
	}
	if getErr != nil {
		return TCPInfo{}, getErr
	}
	return TCPInfo{Retransmits: uint64(ti.Total_retrans), SndCwnd: uint64(ti.Snd_cwnd) * uint64(ti.Snd_mss),
		SndWnd: uint64(ti.Snd_wnd), RTT: ti.Rtt, RTTVar: ti.Rttvar, PMTU: ti.Pmtu}, nil
}
