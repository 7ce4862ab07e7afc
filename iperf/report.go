package iperf

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Report is one test's outcome in the shape of iperf3's -J output, so tools that read iperf3
// JSON (.end.sum_received.bits_per_second, .end.sum_sent, .intervals, .start) read ours too.
type Report struct {
	Start     Start      `json:"start"`
	Intervals []Interval `json:"intervals"`
	End       End        `json:"end"`
	Error     string     `json:"error,omitempty"`
}

type Start struct {
	Connected          []Connected `json:"connected"`
	Version            string      `json:"version"`
	SystemInfo         string      `json:"system_info"`
	Timestamp          Timestamp   `json:"timestamp"`
	ConnectingTo       *HostPort   `json:"connecting_to,omitempty"`
	AcceptedConnection *HostPort   `json:"accepted_connection,omitempty"`
	Cookie             string      `json:"cookie"`
	TestStart          TestStart   `json:"test_start"`
}

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
	Protocol   string `json:"protocol"`
	NumStreams int    `json:"num_streams"`
	Blksize    int    `json:"blksize"`
	Omit       int    `json:"omit"`
	Duration   int    `json:"duration"`
	Bytes      int64  `json:"bytes"`
	Blocks     int64  `json:"blocks"`
	Reverse    int    `json:"reverse"`
	Tos        int    `json:"tos"`
}

// Interval is one reporting interval; Socket numbers a stream by its iperf3 stream id.
type Interval struct {
	Streams []StreamInterval `json:"streams"`
	Sum     StreamInterval   `json:"sum"`
}

type StreamInterval struct {
	Socket        int     `json:"socket,omitempty"`
	Start         float64 `json:"start"`
	End           float64 `json:"end"`
	Seconds       float64 `json:"seconds"`
	Bytes         uint64  `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
	Omitted       bool    `json:"omitted"`
	Sender        bool    `json:"sender"`
}

type End struct {
	Streams     []EndStream `json:"streams"`
	SumSent     Sum         `json:"sum_sent"`
	SumReceived Sum         `json:"sum_received"`
	CPU         CPU         `json:"cpu_utilization_percent"`
}

type EndStream struct {
	Sender   Sum `json:"sender"`
	Receiver Sum `json:"receiver"`
}

// Sum is a total over a stream or all streams. Sender says, as in iperf3, whether the side that
// wrote the report was the sending one.
type Sum struct {
	Socket        int     `json:"socket,omitempty"`
	Start         float64 `json:"start"`
	End           float64 `json:"end"`
	Seconds       float64 `json:"seconds"`
	Bytes         uint64  `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
	// Retransmits is in a real iperf3's sum_sent on Linux; our tool does not count them (the
	// embedded guests report the stack's count as a counter instead).
	Retransmits *int64 `json:"retransmits,omitempty"`
	Sender      bool   `json:"sender"`
}

type CPU struct {
	HostTotal    float64 `json:"host_total"`
	HostUser     float64 `json:"host_user"`
	HostSystem   float64 `json:"host_system"`
	RemoteTotal  float64 `json:"remote_total"`
	RemoteUser   float64 `json:"remote_user"`
	RemoteSystem float64 `json:"remote_system"`
}

func newStart(c cookie, p params, streams []*stream, now time.Time) Start {
	st := Start{
		Version:    "iperf " + Version + " (nicstack)",
		SystemInfo: systemInfo(),
		Timestamp:  Timestamp{Time: now.UTC().Format(time.RFC1123), Timesecs: now.Unix()},
		Cookie:     c.String(),
		TestStart: TestStart{Protocol: "TCP", NumStreams: p.Parallel, Blksize: p.Len, Omit: p.Omit,
			Duration: p.Time, Bytes: p.Num, Blocks: p.BlockCount},
	}
	if p.Reverse {
		st.TestStart.Reverse = 1
	}
	for _, s := range streams {
		lh, lp := splitAddr(s.conn.LocalAddr())
		rh, rp := splitAddr(s.conn.RemoteAddr())
		st.Connected = append(st.Connected, Connected{Socket: s.id, LocalHost: lh, LocalPort: lp, RemoteHost: rh, RemotePort: rp})
	}
	return st
}

func splitAddr(a net.Addr) (string, int) {
	if a == nil {
		return "", 0
	}
	h, p, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String(), 0
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func systemInfo() string {
	b, err := os.ReadFile("/proc/version")
	if err != nil {
		return "nicstack"
	}
	return strings.TrimSpace(string(b))
}

// localResults is what this side sends in EXCHANGE_RESULTS.
func localResults(m *meter) results {
	r := results{CPUUtilTotal: m.cpu.total, CPUUtilUser: m.cpu.user, CPUUtilSystem: m.cpu.sys, SenderHasRetransmits: -1}
	for i, s := range m.streams {
		if s.sender {
			r.SenderHasRetransmits = 0 // we do not count retransmits, and say so
		}
		r.Streams = append(r.Streams, streamResult{ID: s.id, Bytes: float64(m.final[i]), Retransmits: -1,
			EndTime: m.seconds()})
	}
	return r
}

// buildEnd joins this side's totals with the peer's results, matched by stream id.
func buildEnd(m *meter, peer results) End {
	byID := make(map[int]streamResult, len(peer.Streams))
	for _, s := range peer.Streams {
		byID[s.ID] = s
	}
	var e End
	localSender := len(m.streams) > 0 && m.streams[0].sender
	for i, s := range m.streams {
		secs := m.seconds()
		local := Sum{Socket: s.id, End: secs, Seconds: secs, Bytes: m.final[i], BitsPerSecond: rate(m.final[i], secs), Sender: localSender}
		p := byID[s.id]
		pbytes := uint64(max(p.Bytes, 0))
		psecs := p.EndTime - p.StartTime
		if psecs <= 0 {
			psecs = secs
		}
		remote := Sum{Socket: s.id, Start: p.StartTime, End: p.EndTime, Seconds: psecs, Bytes: pbytes, BitsPerSecond: rate(pbytes, psecs), Sender: localSender}
		es := EndStream{Sender: local, Receiver: remote}
		if !s.sender {
			es = EndStream{Sender: remote, Receiver: local}
		}
		e.Streams = append(e.Streams, es)
		addSum(&e.SumSent, es.Sender)
		addSum(&e.SumReceived, es.Receiver)
	}
	e.SumSent.Sender, e.SumReceived.Sender = localSender, localSender
	e.CPU = CPU{HostTotal: m.cpu.total, HostUser: m.cpu.user, HostSystem: m.cpu.sys,
		RemoteTotal: peer.CPUUtilTotal, RemoteUser: peer.CPUUtilUser, RemoteSystem: peer.CPUUtilSystem}
	return e
}

func addSum(to *Sum, s Sum) {
	to.Bytes += s.Bytes
	to.End = max(to.End, s.End)
	to.Seconds = max(to.Seconds, s.Seconds)
	to.BitsPerSecond = rate(to.Bytes, to.Seconds)
}

// WriteText prints the report's summary the way iperf3 prints its final lines.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintln(w, "- - - - - - - - - - - - - - - - - - - - - - - - -")
	fmt.Fprintln(w, "[ ID] Interval           Transfer     Bitrate")
	for _, s := range r.End.Streams {
		fmt.Fprintln(w, formatLine(strconv.Itoa(s.Sender.Socket), s.Sender.Start, s.Sender.End, s.Sender.Bytes, s.Sender.BitsPerSecond)+"  sender")
		fmt.Fprintln(w, formatLine(strconv.Itoa(s.Receiver.Socket), s.Receiver.Start, s.Receiver.End, s.Receiver.Bytes, s.Receiver.BitsPerSecond)+"  receiver")
	}
	if len(r.End.Streams) > 1 {
		s := r.End.SumSent
		fmt.Fprintln(w, formatLine("SUM", s.Start, s.End, s.Bytes, s.BitsPerSecond)+"  sender")
		s = r.End.SumReceived
		fmt.Fprintln(w, formatLine("SUM", s.Start, s.End, s.Bytes, s.BitsPerSecond)+"  receiver")
	}
	if r.Error != "" {
		fmt.Fprintln(w, "iperf3: error -", r.Error)
		return
	}
	fmt.Fprintln(w, "\niperf Done.")
}

// WriteInterval prints one interval line per stream (and a SUM line for several streams).
func WriteInterval(w io.Writer, iv Interval) {
	for _, s := range iv.Streams {
		fmt.Fprintln(w, formatLine(strconv.Itoa(s.Socket), s.Start, s.End, s.Bytes, s.BitsPerSecond))
	}
	if len(iv.Streams) > 1 {
		fmt.Fprintln(w, formatLine("SUM", iv.Sum.Start, iv.Sum.End, iv.Sum.Bytes, iv.Sum.BitsPerSecond))
	}
}

func formatLine(id string, from, to float64, bytes uint64, bps float64) string {
	return fmt.Sprintf("[%3s] %6.2f-%-6.2f sec  %s  %s", id, from, to, formatBytes(bytes), formatBits(bps))
}

func formatBytes(b uint64) string {
	f := float64(b)
	switch {
	case f >= 1<<30:
		return fmt.Sprintf("%6.2f GBytes", f/(1<<30))
	case f >= 1<<20:
		return fmt.Sprintf("%6.1f MBytes", f/(1<<20))
	default:
		return fmt.Sprintf("%6.1f KBytes", f/(1<<10))
	}
}

func formatBits(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%6.2f Gbits/sec", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%6.1f Mbits/sec", bps/1e6)
	default:
		return fmt.Sprintf("%6.1f Kbits/sec", bps/1e3)
	}
}
