package iperf

import (
	"context"
	"net"
	"time"
)

// Network is where iperf opens its connections: the host's kernel sockets (Kernel) or a
// user-space stack such as nicstack's netstack.Stack. Addresses are "host:port"; networks are
// "tcp" and "udp".
type Network interface {
	// DialContext connects to address with o applied before the connection opens, as iperf3
	// sets a data stream's options before connect (so -M is in the SYN).
	DialContext(ctx context.Context, network, address string, o Options) (net.Conn, error)
	// Listen accepts TCP connections on address.
	Listen(network, address string) (net.Listener, error)
	// ListenPacket opens an unconnected UDP socket on address.
	ListenPacket(network, address string) (net.PacketConn, error)
	// Tune applies o to c, a net.Conn or net.PacketConn this network made (the server learns a
	// test's options only after it accepted the connection), and reports the socket as it then
	// is. The zero Options changes nothing. A failure is an *Error naming the option (CodeSetBuf,
	// CodeSetMSS, CodeSetCongestion, CodeSetNoDelay, CodeSetTOS).
	Tune(c any, o Options) (Socket, error)
	// TCPInfo reads a TCP connection's state as Linux's TCP_INFO reports it.
	TCPInfo(c net.Conn) (TCPInfo, error)
}

// Options are a stream's socket options, iperf3's flags in the comments; the zero value of each
// keeps the stack's default.
type Options struct {
	Window     int    // -w: SO_SNDBUF and SO_RCVBUF, bytes
	MSS        int    // -M: TCP_MAXSEG, bytes
	NoDelay    bool   // -N: TCP_NODELAY
	Congestion string // -C: TCP_CONGESTION
	TOS        int    // -S: IP_TOS
	// UserTimeout is --snd-timeout: TCP_USER_TIMEOUT, how long sent data may stay
	// unacknowledged before the connection fails with ETIMEDOUT.
	UserTimeout time.Duration
}

// Socket is what a stack made of a socket: iperf3 reports it in -J's start.
type Socket struct {
	SndBuf, RcvBuf int    // SO_SNDBUF and SO_RCVBUF as the stack reports them (Linux doubles what was set)
	MSS            int    // TCP_MAXSEG; 0 for UDP
	Congestion     string // the TCP congestion control in use; "" for UDP or when unknown
}

// TCPInfo is what iperf3 reads from Linux's struct tcp_info every interval.
type TCPInfo struct {
	Retransmits uint64 // tcpi_total_retrans: segments sent again since the connection opened
	SndCwnd     uint64 // the congestion window in bytes (tcpi_snd_cwnd * tcpi_snd_mss)
	SndWnd      uint64 // the peer's receive window in bytes (tcpi_snd_wnd); 0 when unknown
	RTT         uint32 // smoothed round-trip time, µs
	RTTVar      uint32 // its variation, µs
	PMTU        uint32 // path MTU, bytes
}
