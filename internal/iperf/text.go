package iperf

import (
	"fmt"
	"io"
	"strings"
)

// textOut is where one side prints iperf3's human-readable lines. A server also keeps them when
// the client asked for its output (--get-server-output).
type textOut struct {
	w      io.Writer        // nil: nothing printed
	keep   *strings.Builder // nil: nothing kept
	format byte             // -f: 'a' (adaptive bits) unless given
}

func (o *textOut) printf(format string, args ...any) {
	if o == nil || (o.w == nil && o.keep == nil) {
		return
	}
	s := fmt.Sprintf(format, args...)
	if o.w != nil {
		io.WriteString(o.w, s)
	}
	if o.keep != nil {
		o.keep.WriteString(s)
	}
}

// iperf3's separator and column headers (iperf_locale.c).
const (
	separator          = "- - - - - - - - - - - - - - - - - - - - - - - - -\n"
	headerBW           = "[ ID] Interval           Transfer     Bitrate\n"
	headerBWRetr       = "[ ID] Interval           Transfer     Bitrate         Retr\n"
	headerBWRetrCwnd   = "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd\n"
	headerUDP          = "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n"
	headerUDPSender    = "[ ID] Interval           Transfer     Bitrate         Total Datagrams\n"
	bidirRoleColumn    = "[ ID][Role]"
	omittedMark        = "(omitted)"
	udpSenderPad       = "          " // where a bidirectional test's UDP sender lines leave the jitter column empty
	serverBannerRule   = "-----------------------------------------------------------\n"
	connectedFormat    = "[%3d] local %s port %d connected to %s port %d\n"
	outOfOrderFormat   = "[SUM]%s %4.1f-%4.1f sec  %d datagrams received out-of-order\n"
	iperfDone          = "iperf Done.\n"
	serverOutputText   = "\nServer output:\n%s\n"
	serverOutputJSON   = "\nServer JSON output:\n%s\n"
	connectingFormat   = "Connecting to host %s, port %d\n"
	reverseFormat      = "Reverse mode, remote host %s is sending\n"
	acceptedFormat     = "Accepted connection from %s, port %d\n"
	serverListenFormat = "Server listening on %d (test #%d)\n"
)

// header is a column header with the Role column of a bidirectional test where it has one.
func header(h string, bidir bool) string {
	if bidir {
		return bidirRoleColumn + strings.TrimPrefix(h, "[ ID]")
	}
	return h
}

// line is one result line's common part: the stream's id (or SUM), its role in a
// bidirectional test, the time span, the bytes and the rate (bytes per second).
func (o *textOut) line(id int, role string, from, to float64, bytes uint64, rate float64) string {
	tag := "[SUM]"
	if id > 0 {
		tag = fmt.Sprintf("[%3d]", id)
	}
	return fmt.Sprintf("%s%s %6.2f-%-6.2f sec  %ss  %ss/sec", tag, role, from, to,
		unitString(float64(bytes), 'A'), unitString(rate, o.format))
}

// The endings of iperf3's result lines after the rate.
func plainTail(tail string) string { return "                  " + tail + "\n" }

func retransTail(retrans uint64, tail string) string {
	return fmt.Sprintf("  %3d             %s\n", retrans, tail)
}

func cwndTail(retrans, cwnd uint64, tail string) string {
	return fmt.Sprintf("  %3d   %ss       %s\n", retrans, unitString(float64(cwnd), 'A'), tail)
}

func udpTail(jitterMs float64, lost, total int64, percent float64, tail string) string {
	return fmt.Sprintf("  %5.3f ms  %d/%d (%.2g%%)  %s\n", jitterMs, lost, total, percent, tail)
}

func udpSenderTail(pad string, packets int64, tail string) string {
	return fmt.Sprintf(" %s %d  %s\n", pad, packets, tail)
}

func lostPercent(lost, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return 100 * float64(lost) / float64(total)
}

func omittedTail(omitted bool) string {
	if omitted {
		return omittedMark
	}
	return ""
}
