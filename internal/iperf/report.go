package iperf

import (
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Report is one test's outcome in the shape of iperf3's -J output, key for key: what a key
// holds depends on the protocol, the direction and the side, as in iperf3, and keys iperf3
// leaves out are left out (pointers and omitempty). Tools that read iperf3 JSON read ours.
type Report struct {
	Start            Start           `json:"start"`
	Intervals        []Interval      `json:"intervals"`
	End              End             `json:"end"`
	ServerOutputJSON json.RawMessage `json:"server_output_json,omitempty"`
	ServerOutputText *string         `json:"server_output_text,omitempty"`
	Error            string          `json:"error,omitempty"`
	Err              error           `json:"-"` // what Error says, for errors.Is and TimedOut
}

type Start struct {
	Connected          []Connected `json:"connected"`
	Version            string      `json:"version"`
	SystemInfo         string      `json:"system_info"`
	Timestamp          *Timestamp  `json:"timestamp,omitempty"`
	ConnectingTo       *HostPort   `json:"connecting_to,omitempty"`
	AcceptedConnection *HostPort   `json:"accepted_connection,omitempty"`
	Cookie             string      `json:"cookie,omitempty"`
	TCPMSSDefault      *int        `json:"tcp_mss_default,omitempty"` // the control connection's MSS (0 on a server)
	TCPMSS             *int        `json:"tcp_mss,omitempty"`         // -M
	TargetBitrate      *uint64     `json:"target_bitrate,omitempty"`
	SockBufsize        *int        `json:"sock_bufsize,omitempty"` // -w, 0 when not given
	SndbufActual       *int        `json:"sndbuf_actual,omitempty"`
	RcvbufActual       *int        `json:"rcvbuf_actual,omitempty"`
	TestStart          *TestStart  `json:"test_start,omitempty"`
}

// Connected is one data stream; Socket numbers it by its iperf3 stream id (iperf3 shows the
// file descriptor, which only the process that owns it can use).
type Connected struct {
	Socket     int    `json:"socket"`
	LocalHost  string `json:"local_host"`
	LocalPort  int    `json:"local_port"`
	RemoteHost string `json:"remote_host"`
	RemotePort int    `json:"remote_port"`
}

type Timestamp struct {
	Time     string `json:"time"`
	Timesecs int64  `json:"timesecs"`
}

type HostPort struct {
	Host string `json:"host"`
	Port int    `json:"port"`
}

type TestStart struct {
	Protocol      string `json:"protocol"`
	NumStreams    int    `json:"num_streams"`
	Blksize       int    `json:"blksize"`
	Omit          int    `json:"omit"`
	Duration      int    `json:"duration"`
	Bytes         uint64 `json:"bytes"`
	Blocks        uint64 `json:"blocks"`
	Reverse       int    `json:"reverse"`
	Tos           int    `json:"tos"`
	TargetBitrate uint64 `json:"target_bitrate"`
}

// Interval is one reporting interval. Sum is the client-to-server direction's total, as in
// iperf3; SumBidirReverse the other direction's in a bidirectional test.
type Interval struct {
	Streams         []IntervalStream `json:"streams"`
	Sum             *IntervalStream  `json:"sum,omitempty"`
	SumBidirReverse *IntervalStream  `json:"sum_bidir_reverse,omitempty"`
}

// IntervalStream is one stream's interval (Socket set) or a sum of them (Socket 0). TCP senders
// carry TCP_INFO's values, UDP streams their datagram counts.
type IntervalStream struct {
	Socket        int      `json:"socket,omitempty"`
	Start         float64  `json:"start"`
	End           float64  `json:"end"`
	Seconds       float64  `json:"seconds"`
	Bytes         uint64   `json:"bytes"`
	BitsPerSecond float64  `json:"bits_per_second"`
	Retransmits   *uint64  `json:"retransmits,omitempty"`
	SndCwnd       *uint64  `json:"snd_cwnd,omitempty"`
	SndWnd        *uint64  `json:"snd_wnd,omitempty"`
	RTT           *uint32  `json:"rtt,omitempty"`
	RTTVar        *uint32  `json:"rttvar,omitempty"`
	PMTU          *uint32  `json:"pmtu,omitempty"`
	JitterMs      *float64 `json:"jitter_ms,omitempty"`
	LostPackets   *int64   `json:"lost_packets,omitempty"`
	Packets       *int64   `json:"packets,omitempty"`
	LostPercent   *float64 `json:"lost_percent,omitempty"`
	Omitted       bool     `json:"omitted"`
	Sender        bool     `json:"sender"`
}

// End is the summary. As in iperf3, Sender in each Sum says whether the direction it belongs to
// is the one this side sends, and the sums of a bidirectional test's server-to-client direction
// are the *BidirReverse ones.
type End struct {
	Streams                 []EndStream `json:"streams,omitempty"`
	Sum                     *Sum        `json:"sum,omitempty"` // UDP only
	SumSent                 *Sum        `json:"sum_sent,omitempty"`
	SumReceived             *Sum        `json:"sum_received,omitempty"`
	SumBidirReverse         *Sum        `json:"sum_bidir_reverse,omitempty"`
	SumSentBidirReverse     *Sum        `json:"sum_sent_bidir_reverse,omitempty"`
	SumReceivedBidirReverse *Sum        `json:"sum_received_bidir_reverse,omitempty"`
	CPU                     *CPU        `json:"cpu_utilization_percent,omitempty"`
	SenderTCPCongestion     string      `json:"sender_tcp_congestion,omitempty"`
	ReceiverTCPCongestion   string      `json:"receiver_tcp_congestion,omitempty"`
}

// EndStream is one stream's summary: Sender and Receiver for TCP, UDP for UDP.
type EndStream struct {
	Sender   *Sum `json:"sender,omitempty"`
	Receiver *Sum `json:"receiver,omitempty"`
	UDP      *Sum `json:"udp,omitempty"`
}

// Sum is a total over a stream (Socket set) or over all streams of a direction.
type Sum struct {
	Socket        int      `json:"socket,omitempty"`
	Start         float64  `json:"start"`
	End           float64  `json:"end"`
	Seconds       float64  `json:"seconds"`
	Bytes         uint64   `json:"bytes"`
	BitsPerSecond float64  `json:"bits_per_second"`
	Retransmits   *uint64  `json:"retransmits,omitempty"`
	MaxSndCwnd    *uint64  `json:"max_snd_cwnd,omitempty"`
	MaxSndWnd     *uint64  `json:"max_snd_wnd,omitempty"`
	MaxRTT        *uint64  `json:"max_rtt,omitempty"`
	MinRTT        *uint64  `json:"min_rtt,omitempty"`
	MeanRTT       *uint64  `json:"mean_rtt,omitempty"`
	JitterMs      *float64 `json:"jitter_ms,omitempty"`
	LostPackets   *int64   `json:"lost_packets,omitempty"`
	Packets       *int64   `json:"packets,omitempty"`
	LostPercent   *float64 `json:"lost_percent,omitempty"`
	OutOfOrder    *int64   `json:"out_of_order,omitempty"`
	Sender        bool     `json:"sender"`
}

type CPU struct {
	HostTotal    float64 `json:"host_total"`
	HostUser     float64 `json:"host_user"`
	HostSystem   float64 `json:"host_system"`
	RemoteTotal  float64 `json:"remote_total"`
	RemoteUser   float64 `json:"remote_user"`
	RemoteSystem float64 `json:"remote_system"`
}

// Received is the client-to-server direction's received total (zero when the test ended
// before a summary). A server fills it only when it received: like iperf3's, it summarizes
// before the client's results arrive.
func (r *Report) Received() Sum {
	if r.End.SumReceived == nil {
		return Sum{}
	}
	return *r.End.SumReceived
}

// Measured is what this side counted itself of the test's main direction: the received total,
// or for a server that only sent (a reverse test) the sent one.
func (r *Report) Measured() Sum {
	if ts := r.Start.TestStart; r.Start.AcceptedConnection != nil && ts != nil && ts.Reverse == 1 && r.End.SumSent != nil {
		return *r.End.SumSent
	}
	return r.Received()
}

// WriteJSON prints the report as iperf3 -J prints it: tab-indented, then a newline.
func (r *Report) WriteJSON(w interface{ Write([]byte) (int, error) }) error {
	b, err := json.MarshalIndent(r, "", "\t")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func newReport() *Report {
	return &Report{Start: Start{Connected: []Connected{}, Version: "iperf " + Version, SystemInfo: systemInfo()},
		Intervals: []Interval{}}
}

func timestamp(now time.Time) *Timestamp {
	return &Timestamp{Time: now.UTC().Format("Mon, 02 Jan 2006 15:04:05 GMT"), Timesecs: now.Unix()}
}

func splitAddr(a net.Addr) (string, int) {
	if a == nil {
		return "", 0
	}
	ap, err := netipAddrPort(a)
	if err == nil {
		return ap.Addr().Unmap().String(), int(ap.Port())
	}
	h, p, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String(), 0
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

// systemInfo is iperf3's get_system_info: uname's sysname, nodename, release, version, machine.
func systemInfo() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		b, _ := os.ReadFile("/proc/version")
		return strings.TrimSpace(string(b))
	}
	f := func(b []byte) string { return unix.ByteSliceToString(b) }
	return strings.Join([]string{f(u.Sysname[:]), f(u.Nodename[:]), f(u.Release[:]), f(u.Version[:]), f(u.Machine[:])}, " ")
}

func ptr[T any](v T) *T { return &v }

func netipAddrPort(a net.Addr) (netip.AddrPort, error) {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort(), nil
	case *net.UDPAddr:
		return a.AddrPort(), nil
	}
	return netip.ParseAddrPort(a.String())
}
