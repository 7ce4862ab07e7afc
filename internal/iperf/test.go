package iperf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"syscall"
	"time"
)

// udpBuffer is the socket buffer a UDP stream asks for when -w does not say: 20 ms at 1 Gbit/s.
const udpBuffer = 2 << 20

// mode is which way a test's data flows from one side's point of view (iperf3's test->mode).
type mode int8

const (
	modeReceiver mode = 0
	modeSender   mode = 1
	modeBidir    mode = -1
)

// test is one test on either side: its parameters, streams and measurement, and what it prints.
// Only the goroutine that runs the test touches it; the streams' goroutines share counters.
type test struct {
	client   bool
	p        params
	udp      bool
	mode     mode
	net      Network
	opts     Options
	interval time.Duration
	cookie   cookie
	streams  []*stream
	failed   chan struct{} // a stream failed
	lim      *limit
	out      *textOut
	rep      *Report

	begin    time.Time // TEST_START; rate limits count from here
	start    time.Time // the measured time's start: begin, or the end of the omitted seconds
	lastTick time.Time
	end      time.Time
	omitting bool
	shown    int     // intervals printed
	pending  *sample // the last interval, closed but not yet reported
	cpu0     cpuTimes
	cpu      cpuPercent
	peerCPU  cpuPercent

	// iperf3's sender_has_retransmits (1 when this side's senders read TCP_INFO, -1 when it
	// has none) and other_side_has_retransmits (the peer's, in a bidirectional test).
	senderHasRetransmits    int
	otherSideHasRetransmits int
	congestionUsed          string
	peerCongestionUsed      string
}

func newTest(client bool, p params, n Network, interval time.Duration, out *textOut) *test {
	t := &test{client: client, p: p, udp: p.UDP, net: n, interval: interval, out: out, rep: newReport(),
		failed: make(chan struct{}, 1),
		opts:   Options{Window: p.Window, MSS: p.MSS, NoDelay: p.NoDelay, Congestion: p.Congestion, TOS: p.TOS}}
	switch {
	case p.Bidirectional:
		t.mode = modeBidir
	case p.Reverse != client:
		t.mode = modeSender
	default:
		t.mode = modeReceiver
	}
	if t.interval == 0 {
		t.interval = time.Second
	}
	return t
}

// role is C or S, as iperf3 marks a bidirectional test's lines.
func (t *test) role() string {
	if t.client {
		return "C"
	}
	return "S"
}

func (t *test) protocol() string {
	if t.udp {
		return "UDP"
	}
	return "TCP"
}

// addStream sets up a new data stream on conn: its sendfile block for -Z, its place in the
// report, and the line iperf3 prints for it.
func (t *test) addStream(conn net.Conn, sender bool) (*stream, error) {
	s := newStream(streamID(len(t.streams)), conn, sender, t.udp, t.p.Len, t.p.RepeatingData != 0)
	s.u64 = t.p.UDPCounters64 != 0
	s.fails = t.failed
	t.streams = append(t.streams, s)
	if sender && t.p.ZeroCopy != 0 {
		if err := s.zeroCopy(); err != nil && t.client {
			return s, err // a server sends the plain way when its stack has no sendfile
		}
	}
	lh, lp := splitAddr(conn.LocalAddr())
	rh, rp := splitAddr(conn.RemoteAddr())
	t.rep.Start.Connected = append(t.rep.Start.Connected, Connected{Socket: s.id, LocalHost: lh, LocalPort: lp, RemoteHost: rh, RemotePort: rp})
	t.out.printf(connectedFormat, s.id, lh, lp, rh, rp)
	return s, nil
}

// tune applies o to a stream's socket (the client set the test's options when it dialed), checks
// what the stack made of the test's options as iperf3 does, and keeps the first stream's socket
// for the report.
func (t *test) tune(c any, o Options) error {
	sock, err := t.net.Tune(c, o)
	if err != nil {
		var ie *Error
		if errors.As(err, &ie) && ie.Code == CodeSetCongestion && ie.Errno == syscall.ENOENT && !t.client {
			// The client's algorithm is not on this host: iperf3's server warns and goes on.
			sock, err = t.net.Tune(c, Options{})
		}
		if err != nil {
			return err
		}
	}
	if w := t.opts.Window; w > 0 && (w > sock.SndBuf || w > sock.RcvBuf) {
		return &Error{Code: CodeSetBuf2}
	}
	if want := max(t.p.Len+1024, udpBuffer); t.udp && t.opts.Window == 0 && sock.RcvBuf < want {
		// iperf3 grows the buffers to fit a datagram. We grow them further: a Go receiver can
		// be descheduled for longer than a C select loop, and a busy host's scheduling must
		// not pass for loss on the network.
		if sock, err = t.net.Tune(c, Options{Window: want}); err != nil {
			return err
		}
	}
	if sock.Congestion != "" {
		t.congestionUsed = sock.Congestion
	}
	if t.rep.Start.SndbufActual == nil { // the first stream's socket speaks for all, as in iperf3
		t.rep.Start.SockBufsize, t.rep.Start.SndbufActual, t.rep.Start.RcvbufActual = ptr(t.opts.Window), ptr(sock.SndBuf), ptr(sock.RcvBuf)
	}
	return nil
}

// connected fills the report's start as iperf3's on_connect does, once parameters are agreed.
func (t *test) connected(now time.Time, ctrlMSS int) {
	st := &t.rep.Start
	st.Timestamp = timestamp(now)
	st.Cookie = t.cookie.String()
	if !t.udp {
		if t.p.MSS > 0 {
			st.TCPMSS = ptr(t.p.MSS)
		} else {
			st.TCPMSSDefault = ptr(ctrlMSS)
		}
	}
	st.TargetBitrate = ptr(t.p.Bandwidth)
}

// begin starts the measured time (TEST_START): the streams' rate limits, the omitted seconds,
// and what the report says of the test.
func (t *test) startTest(now time.Time) {
	t.begin, t.start, t.lastTick = now, now, now
	t.omitting = t.p.Omit > 0
	t.cpu0 = readCPU()
	p := t.p
	ts := &TestStart{Protocol: t.protocol(), NumStreams: p.Parallel, Blksize: p.Len, Omit: p.Omit, Duration: p.Time,
		Bytes: p.Num, Blocks: p.BlockCount, Tos: p.TOS, TargetBitrate: p.Bandwidth}
	if p.Reverse {
		ts.Reverse = 1
	}
	t.rep.Start.TestStart = ts
	burst := max(p.Burst, 1)
	for _, s := range t.streams {
		if s.sender && p.Bandwidth > 0 {
			s.pace = newPacer(float64(p.Bandwidth), burst, now)
		}
		s.limit = t.lim
	}
	if t.lim != nil {
		t.lim.counting.Store(!t.omitting)
	}
	// iperf3 reads TCP_INFO for a test whose side sends, on a host that has it.
	t.senderHasRetransmits = 0
	if t.mode != modeReceiver && !t.udp && len(t.streams) > 0 {
		if _, err := t.net.TCPInfo(t.streams[0].conn); err == nil {
			t.senderHasRetransmits = 1
		}
	}
}

// run starts the streams' goroutines; a server's UDP receivers are fed by its socket instead.
func (t *test) run() {
	for _, s := range t.streams {
		s.running = true
		if _, fed := s.conn.(*udpPeer); fed && !s.sender {
			close(s.done)
			continue
		}
		go s.run()
	}
}

// ctrlMsg is a control state that arrived while the test ran, or the failure to read one.
type ctrlMsg struct {
	state int8
	err   error
}

// measure runs the test's clock until stopAt (zero: never) or the -n/-k limit, both only
// outside the omitted seconds, or until a control message arrives or a stream fails. Intervals
// close every t.interval from the test's start (again from the end of the omitted seconds),
// and when the end, a tick and the omitted seconds' end fall due together they go in that
// order, as iperf3's timers do: a 1 s test reports one interval, not one and a sliver. It
// returns the control message, if one ended it. With idle > 0 a test on whose streams nothing
// moved for idle fails with IENOMSG, as iperf3's select loop does when it sat idle that long.
func (t *test) measure(ctx context.Context, stopAt time.Time, idle time.Duration, ctrl <-chan ctrlMsg) (*ctrlMsg, error) {
	next := t.begin.Add(t.interval)
	moved, movedAt := t.moved(), t.begin
	omitAt := t.begin.Add(time.Duration(t.p.Omit) * time.Second)
	var reached <-chan struct{}
	if t.lim != nil {
		reached = t.lim.reached
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		switch {
		case !t.omitting && !stopAt.IsZero() && !now.Before(stopAt):
			return nil, nil
		case t.interval > 0 && !now.Before(next):
			t.closeInterval(now)
			t.reportInterval()
			if next = next.Add(t.interval); next.Before(now) {
				next = now.Add(t.interval)
			}
			continue
		case t.omitting && !now.Before(omitAt):
			t.endOmit(now)
			next = now.Add(t.interval)
			continue
		}
		if idle > 0 {
			if m := t.moved(); m != moved {
				moved, movedAt = m, now
			} else if now.Sub(movedAt) >= idle {
				return nil, &Error{Code: CodeNoMessage}
			}
		}
		wake := now.Add(time.Hour)
		earlier := func(at time.Time) {
			if at.Before(wake) {
				wake = at
			}
		}
		if !stopAt.IsZero() {
			earlier(stopAt)
		}
		if t.interval > 0 {
			earlier(next)
		}
		if t.omitting {
			earlier(omitAt)
		}
		if idle > 0 {
			earlier(movedAt.Add(idle))
		}
		timer.Reset(time.Until(wake))
		select {
		case <-timer.C:
		case <-reached: // counted only outside the omitted seconds
			return nil, nil
		case m := <-ctrl:
			return &m, nil
		case <-t.failed:
			for _, s := range t.streams {
				if err := s.failure(); err != nil {
					return nil, err
				}
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// moved is what the streams moved so far, both ways.
func (t *test) moved() uint64 {
	var n uint64
	for _, s := range t.streams {
		n += s.bytes.Load()
	}
	return n
}

// endOmit ends the omitted seconds as iperf3's iperf_reset_stats does: what was counted so far
// is set aside, the jitter starts over and the measured time starts now. A tick that just
// closed the last omitted interval leaves the sliver after it uncounted.
func (t *test) endOmit(now time.Time) {
	if t.interval <= 0 || now.Sub(t.lastTick) >= t.interval/10 {
		t.closeInterval(now)
		t.reportInterval()
	}
	t.omitting = false
	for _, s := range t.streams {
		s.omitted = s.now()
		s.last = s.omitted
		if s.udp && !s.sender {
			s.rx.restartJitter()
		}
		if t.senderHasRetransmits == 1 {
			if ti, err := t.net.TCPInfo(s.conn); err == nil {
				s.tcp.prevRetrans = ti.Retransmits
			}
		}
		s.tcp.retrans = 0
	}
	t.start, t.lastTick = now, now
	if t.lim != nil {
		t.lim.counting.Store(true)
	}
}

// finish ends the measured time at now: the senders stop, the last interval closes (to be
// reported) and the counters freeze; a receiver may go on draining, uncounted. What a sender
// wrote is counted once its write returned, so the senders stop before the counters are read:
// else a receiver could count what its sender did not.
func (t *test) finish(now time.Time) {
	for _, s := range t.streams {
		if s.sender {
			s.halt()
		}
	}
	t.closeInterval(now)
	t.end = now
	for _, s := range t.streams {
		s.final = s.now()
	}
	t.cpu = readCPU().since(t.cpu0, now.Sub(t.begin))
}

// halt stops every stream's goroutine.
func (t *test) halt() {
	for _, s := range t.streams {
		s.halt()
	}
}

func (t *test) closeStreams() {
	for _, s := range t.streams {
		s.close()
	}
}

// groups are the stream directions in the order iperf3 reports them: the client's sending
// streams first, the server's receiving ones first. Each entry says whether its streams send.
func (t *test) groups() []bool {
	switch t.mode {
	case modeBidir:
		return []bool{t.client, !t.client}
	case modeSender:
		return []bool{true}
	}
	return []bool{false}
}

// reverseName says whether a group's sums carry iperf3's _bidir_reverse names: those of the
// server-to-client direction of a bidirectional test.
func (t *test) reverseName(sender bool) bool {
	return t.mode == modeBidir && sender != t.client
}

func (t *test) roleTag(sender bool) string {
	if t.mode != modeBidir {
		return ""
	}
	dir := "RX"
	if sender {
		dir = "TX"
	}
	return "[" + dir + "-" + t.role() + "]"
}

// sample is every stream's share of one interval, taken when the interval closed. A client
// reports its last one with the summary, once the server's results are in, as iperf3 does.
type sample struct {
	from, to, secs float64
	omitted        bool
	rows           []intervalRow
}

type intervalRow struct {
	s                  *stream
	bytes              uint64
	packets, lost, ooo int64
	jitter             float64
}

// closeInterval closes the interval that ends at now: it samples every stream (TCP_INFO too,
// where this side's senders read it), and keeps the interval to report unless it is a sliver
// with no data, as iperf3 leaves out the short empty interval a test's end can make.
func (t *test) closeInterval(now time.Time) {
	sm := &sample{secs: now.Sub(t.lastTick).Seconds(), from: t.lastTick.Sub(t.start).Seconds(),
		to: now.Sub(t.start).Seconds(), omitted: t.omitting}
	t.lastTick = now
	keep := t.interval <= 0 || sm.secs >= t.interval.Seconds()*0.1
	for _, s := range t.streams {
		cur := s.now()
		r := intervalRow{s: s, bytes: cur.bytes - s.last.bytes, packets: cur.packets - s.last.packets,
			lost: cur.lost - s.last.lost, ooo: cur.ooo - s.last.ooo}
		if s.udp && !s.sender {
			_, _, _, r.jitter = s.rx.counts()
		}
		s.last = cur
		if !t.udp && t.senderHasRetransmits == 1 {
			t.sampleTCP(s)
		}
		sm.rows = append(sm.rows, r)
		keep = keep || r.bytes > 0
	}
	if keep {
		t.pending = sm
	}
}

// reportInterval prints the interval closeInterval kept, and adds it to the report.
func (t *test) reportInterval() {
	sm := t.pending
	if sm == nil {
		return
	}
	t.pending = nil
	from, to, secs, omitted := sm.from, sm.to, sm.secs, sm.omitted
	rate := func(b uint64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(b) / secs
	}
	var iv Interval
	o := t.out
	for gi, sender := range t.groups() {
		var sum IntervalStream
		var retrans uint64
		var packets, lost int64
		var jitter float64
		for _, r := range sm.rows {
			s := r.s
			if s.sender != sender {
				continue
			}
			if s == t.streams[0] && gi == 0 {
				switch {
				case t.shown == 0:
					o.printf("%s", t.intervalHeader())
				case t.p.Parallel > 1:
					o.printf("%s", separator)
				}
			}
			js := IntervalStream{Socket: s.id, Start: from, End: to, Seconds: secs, Bytes: r.bytes,
				BitsPerSecond: rate(r.bytes) * 8, Omitted: omitted, Sender: s.sender}
			line := o.line(s.id, t.roleTag(s.sender), from, to, r.bytes, rate(r.bytes))
			switch {
			case !t.udp && t.senderHasRetransmits == 1 && s.sender:
				tc := s.tcp
				js.Retransmits, js.SndCwnd, js.SndWnd = ptr(tc.intervalRetrans), ptr(tc.cwnd), ptr(tc.wnd)
				js.RTT, js.RTTVar, js.PMTU = ptr(tc.rtt), ptr(tc.rttvar), ptr(tc.pmtu)
				line += cwndTail(tc.intervalRetrans, tc.cwnd, omittedTail(omitted))
				retrans += tc.intervalRetrans
			case !t.udp:
				line += plainTail(omittedTail(omitted))
			case s.sender:
				js.Packets = ptr(r.packets)
				line += udpSenderTail(t.udpPad(), r.packets, omittedTail(omitted))
				packets += r.packets
			default:
				pct := lostPercent(r.lost, r.packets)
				js.JitterMs, js.LostPackets, js.Packets, js.LostPercent = ptr(r.jitter*1000), ptr(r.lost), ptr(r.packets), ptr(pct)
				line += udpTail(r.jitter*1000, r.lost, r.packets, pct, omittedTail(omitted))
				packets, lost, jitter = packets+r.packets, lost+r.lost, jitter+r.jitter
			}
			o.printf("%s", line)
			iv.Streams = append(iv.Streams, js)
			sum.Bytes += r.bytes
		}
		sum.Start, sum.End, sum.Seconds, sum.BitsPerSecond = from, to, secs, rate(sum.Bytes)*8
		sum.Omitted, sum.Sender = omitted, sender
		line := o.line(0, t.roleTag(sender), from, to, sum.Bytes, rate(sum.Bytes))
		switch {
		case !t.udp && t.senderHasRetransmits == 1 && sender:
			sum.Retransmits = ptr(retrans)
			line += retransTail(retrans, omittedTail(omitted))
		case !t.udp:
			line += plainTail(omittedTail(omitted))
		case sender:
			sum.Packets = ptr(packets)
			line += udpSenderTail(t.udpPad(), packets, omittedTail(omitted))
		default:
			jitter /= float64(t.p.Parallel)
			pct := lostPercent(lost, packets)
			sum.JitterMs, sum.LostPackets, sum.Packets, sum.LostPercent = ptr(jitter*1000), ptr(lost), ptr(packets), ptr(pct)
			line += udpTail(jitter*1000, lost, packets, pct, omittedTail(omitted))
		}
		if t.p.Parallel > 1 {
			o.printf("%s", line)
		}
		if t.reverseName(sender) {
			iv.SumBidirReverse = &sum
		} else {
			iv.Sum = &sum
		}
	}
	t.shown++
	t.rep.Intervals = append(t.rep.Intervals, iv)
}

func (t *test) udpPad() string {
	if t.mode == modeBidir {
		return udpSenderPad
	}
	return ""
}

func (t *test) intervalHeader() string {
	bidir := t.mode == modeBidir
	switch {
	case !t.udp && t.senderHasRetransmits == 1:
		return header(headerBWRetrCwnd, bidir)
	case !t.udp:
		return header(headerBW, bidir)
	case t.mode == modeSender:
		return headerUDPSender
	}
	return header(headerUDP, bidir)
}

// sampleTCP reads a stream's TCP_INFO as iperf3's stats callback does each interval.
func (t *test) sampleTCP(s *stream) {
	ti, err := t.net.TCPInfo(s.conn)
	if err != nil {
		return
	}
	tc := &s.tcp
	tc.intervalRetrans = ti.Retransmits - min(tc.prevRetrans, ti.Retransmits)
	tc.retrans += tc.intervalRetrans
	tc.prevRetrans = ti.Retransmits
	tc.cwnd, tc.wnd, tc.rtt, tc.rttvar, tc.pmtu = ti.SndCwnd, ti.SndWnd, ti.RTT, ti.RTTVar, ti.PMTU
	tc.maxCwnd, tc.maxWnd = max(tc.maxCwnd, ti.SndCwnd), max(tc.maxWnd, ti.SndWnd)
	rtt := uint64(ti.RTT)
	tc.maxRTT = max(tc.maxRTT, rtt)
	if tc.minRTT == 0 || rtt < tc.minRTT {
		tc.minRTT = rtt
	}
	tc.sumRTT += rtt
	tc.countRTT++
}

// results is what this side sends in EXCHANGE_RESULTS (send_results).
func (t *test) results() results {
	r := results{CPUUtilTotal: t.cpu.total, CPUUtilUser: t.cpu.user, CPUUtilSystem: t.cpu.sys,
		SenderHasRetransmits: float64(t.senderHasRetransmits), CongestionUsed: t.congestionUsed, Streams: []streamResult{}}
	if t.mode == modeReceiver {
		r.SenderHasRetransmits = -1
	}
	end := t.end.Sub(t.start).Seconds()
	for _, s := range t.streams {
		sr := streamResult{ID: float64(s.id), Retransmits: -1, Packets: float64(s.final.packets), EndTime: end}
		if s.sender {
			sr.Bytes = float64(s.final.bytes - s.omitted.bytes)
			if t.senderHasRetransmits == 1 {
				sr.Retransmits = float64(s.tcp.retrans)
			}
		} else {
			sr.Bytes = float64(s.final.bytes - s.omitted.bytes)
			_, _, _, sr.Jitter = s.rx.counts()
			sr.Errors = float64(s.final.lost)
		}
		r.Streams = append(r.Streams, sr)
	}
	return r
}

// takeResults joins the peer's EXCHANGE_RESULTS to ours (get_results): streams match by id.
func (t *test) takeResults(r results) error {
	t.peerCPU = cpuPercent{total: r.CPUUtilTotal, user: r.CPUUtilUser, sys: r.CPUUtilSystem}
	switch t.mode {
	case modeReceiver:
		t.senderHasRetransmits, t.otherSideHasRetransmits = int(r.SenderHasRetransmits), 0
	case modeBidir:
		t.otherSideHasRetransmits = int(r.SenderHasRetransmits)
	}
	t.peerCongestionUsed = r.CongestionUsed
	for _, pr := range r.Streams {
		var s *stream
		for _, c := range t.streams {
			if float64(c.id) == pr.ID {
				s = c
			}
		}
		if s == nil {
			return &Error{Code: CodeStreamID, Err: fmt.Errorf("the peer reports stream %v", pr.ID)}
		}
		s.peer = pr
	}
	return nil
}

// count reads a number the peer sent as a count: negative or absurd values count nothing.
func count(v float64) int64 {
	if v < 0 || v > math.MaxInt64/2 || v != v {
		return 0
	}
	return int64(v)
}

// cpuTimes and cpuPercent are iperf3's cpu_util: this process's CPU time over the test.
type cpuTimes struct{ user, sys time.Duration }

type cpuPercent struct{ total, user, sys float64 }

func readCPU() cpuTimes {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return cpuTimes{}
	}
	return cpuTimes{user: time.Duration(ru.Utime.Nano()), sys: time.Duration(ru.Stime.Nano())}
}

func (c cpuTimes) since(c0 cpuTimes, wall time.Duration) cpuPercent {
	if wall <= 0 {
		return cpuPercent{}
	}
	u := 100 * float64(c.user-c0.user) / float64(wall)
	s := 100 * float64(c.sys-c0.sys) / float64(wall)
	return cpuPercent{total: u + s, user: u, sys: s}
}
