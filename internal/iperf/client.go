package iperf

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"time"
)

// ClientConfig describes one test, with iperf3's flag names in the comments.
type ClientConfig struct {
	Network  Network       // where to connect; nil means Kernel
	Server   string        // -c host and -p port, as "host:port"
	UDP      bool          // -u
	Duration time.Duration // -t, whole seconds; 0 means 10 s unless Bytes or Blocks end the test
	Bytes    uint64        // -n: end after this many bytes
	Blocks   uint64        // -k: end after this many blocks
	Omit     int           // -O: seconds measured but left out of the results
	Reverse  bool          // -R: the server sends
	Bidir    bool          // --bidir: both send
	Parallel int           // -P; 0 means 1
	// BlockSize is -l: 0 means 128 KiB for TCP, and for UDP the control connection's MSS.
	BlockSize int
	Rate      uint64 // -b: bits per second per stream; 0 is unlimited (Command sets UDP's 1 Mbit/s)
	Burst     int    // -b RATE/BURST: blocks sent between two checks of the rate
	Options          // -w, -M, -N, -C, -S
	ZeroCopy  bool   // -Z: send with sendfile
	UDP64     bool   // --udp-counters-64bit
	Repeating bool   // --repeating-payload
	// GetServerOutput is --get-server-output: the server's own report comes back with the results.
	GetServerOutput bool
	Interval        time.Duration // -i; 0 means 1 s, negative no reports between start and end
	Format          byte          // -f: k, m, g, t (bits) or K, M, G, T (bytes); 0 adapts
	// Output receives what iperf3 prints: its text lines as the test goes, or with JSON the -J
	// report at the end (with "error" set on failure). Nil prints nothing.
	Output io.Writer
	JSON   bool
	// RcvTimeout is --rcv-timeout: a test that receives (-R, --bidir) and gets nothing this long
	// fails with "idle timeout for receiving data". 0 means iperf3's 120 s.
	RcvTimeout time.Duration
	// SndTimeout is --snd-timeout: TCP_USER_TIMEOUT on the control and data connections, so a
	// sender whose peer vanished fails with ETIMEDOUT. 0 keeps the system's.
	SndTimeout time.Duration
	// IPVersion is -4 or -6: 4 or 6 connects over that IP version only; 0 over the one
	// Server's address has.
	IPVersion int
}

// ipNetwork is network ("tcp", "udp") for IP version v (4, 6; 0 for either): "tcp6".
func ipNetwork(network string, v int) string {
	if v == 0 {
		return network
	}
	return network + strconv.Itoa(v)
}

// RunClient runs one test against an iperf3 server and returns its report. On an error after
// the test started, the report holds what was measured and its Error field says what failed.
// Errors iperf3 would name are *Error, with its message.
func RunClient(ctx context.Context, cfg ClientConfig) (*Report, error) {
	p, err := cfg.params()
	if err != nil {
		return nil, err
	}
	if cfg.Network == nil {
		cfg.Network = Kernel
	}
	out := &textOut{format: 'a'}
	if cfg.Format != 0 {
		out.format = cfg.Format
	}
	if !cfg.JSON {
		out.w = cfg.Output
	}
	t := newTest(true, p, cfg.Network, cfg.Interval, out)
	t.opts.UserTimeout = cfg.SndTimeout
	c := &client{cfg: cfg, t: t}
	err = c.run(ctx)
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		t.rep.Error, t.rep.Err = err.Error(), err
	}
	if cfg.JSON && cfg.Output != nil {
		if werr := t.rep.WriteJSON(cfg.Output); err == nil {
			err = werr
		}
	}
	return t.rep, err
}

// params checks the test as iperf3 checks its command line and turns it into the parameters
// the server gets.
func (cfg *ClientConfig) params() (params, error) {
	p := params{TCP: !cfg.UDP, UDP: cfg.UDP, Omit: cfg.Omit, Num: cfg.Bytes, BlockCount: cfg.Blocks,
		MSS: cfg.MSS, NoDelay: cfg.NoDelay, Parallel: max(cfg.Parallel, 1), Reverse: cfg.Reverse,
		Bidirectional: cfg.Bidir, Window: cfg.Window, Len: cfg.BlockSize, Bandwidth: cfg.Rate,
		PacingTimer: defaultPacingTimer, Burst: cfg.Burst, TOS: cfg.TOS, Congestion: cfg.Congestion,
		ClientVersion: Version}
	secs := int((cfg.Duration + time.Second/2) / time.Second)
	switch {
	case cfg.Duration > 0:
		p.Time = max(secs, 1)
	case cfg.Bytes == 0 && cfg.Blocks == 0:
		p.Time = 10
	}
	for _, f := range []struct {
		on  bool
		set *int
	}{{cfg.GetServerOutput, &p.GetServerOutput}, {cfg.UDP64, &p.UDPCounters64}, {cfg.Repeating, &p.RepeatingData}, {cfg.ZeroCopy, &p.ZeroCopy}} {
		if f.on {
			*f.set = 1
		}
	}
	return p, p.check(true)
}

// check refuses what iperf3 refuses, with its codes: on the client for a command line, on the
// server for what a client sent (which must not make it allocate or wait without bound).
func (p *params) check(client bool) error {
	switch {
	case p.SCTP:
		return &Error{Code: CodeNoSCTP}
	case p.TCP == p.UDP:
		return &Error{Code: CodeProtocol}
	case p.Reverse && p.Bidirectional:
		return &Error{Code: CodeReverseBidir}
	case p.Parallel < 1 || p.Parallel > maxStreams:
		return &Error{Code: CodeNumStreams}
	case p.Time < 0 || p.Time > maxTime:
		return &Error{Code: CodeDuration}
	case p.Omit < 0 || p.Omit > MaxOmit:
		return &Error{Code: CodeOmit}
	case (p.Time > 0 && client && (p.Num > 0 || p.BlockCount > 0)) || (p.Num > 0 && p.BlockCount > 0):
		return &Error{Code: CodeEndConditions}
	case p.Window < 0 || p.Window > maxBuffer:
		return &Error{Code: CodeBufSize}
	case p.MSS < 0 || p.MSS > maxMSS:
		return &Error{Code: CodeMSS}
	case p.TOS < 0 || p.TOS > 255:
		return &Error{Code: CodeBadTOS}
	case p.Burst < 0 || p.Burst > maxBurst:
		return &Error{Code: CodeBadBurst}
	case p.UDP && p.Len != 0 && (p.Len < minUDPBlockSize || p.Len > maxUDPBlockSize):
		return &Error{Code: CodeUDPBlockSize}
	case p.Len < 0 || p.Len > maxBlockSize:
		return &Error{Code: CodeBlockSize}
	}
	if p.TCP && p.Len == 0 {
		p.Len = DefaultBlockSize
	}
	return nil
}

type client struct {
	cfg  ClientConfig
	t    *test
	ctrl net.Conn
}

func (c *client) run(ctx context.Context) error {
	t := c.t
	host, portStr, _ := net.SplitHostPort(c.cfg.Server)
	port, _ := strconv.Atoi(portStr)
	ctrl, err := c.cfg.Network.DialContext(ctx, ipNetwork("tcp", c.cfg.IPVersion), c.cfg.Server, Options{UserTimeout: c.cfg.SndTimeout})
	if err != nil {
		return fail(CodeConnect, err)
	}
	c.ctrl = ctrl
	defer ctrl.Close()
	// Cancelling ctx unblocks whatever the control channel waits for.
	stopCancel := context.AfterFunc(ctx, func() { _ = ctrl.SetDeadline(time.Now()) })
	defer stopCancel()
	defer t.closeStreams()
	defer t.halt()

	if t.cookie, err = newCookie(); err != nil {
		return err
	}
	if _, err := ctrl.Write(t.cookie[:]); err != nil {
		return fail(105, err) // IESENDCOOKIE
	}
	// iperf3 sets TCP_NODELAY on the control connection and sizes UDP datagrams to its MSS.
	ctrlMSS := 0
	if sock, err := c.cfg.Network.Tune(ctrl, Options{NoDelay: true}); err == nil && sock.MSS > 0 && sock.MSS <= maxUDPBlockSize {
		ctrlMSS = sock.MSS
	}
	if t.udp && t.p.Len == 0 {
		t.p.Len = defaultUDPBlockSize
		if ctrlMSS > 0 {
			t.p.Len = ctrlMSS
		}
	}
	if t.p.Num > 0 || t.p.BlockCount > 0 {
		t.lim = &limit{bytes: t.p.Num, blocks: t.p.BlockCount, reached: make(chan struct{})}
	}

	var pending int8 // a state the running test already read
	for {
		st := pending
		pending = 0
		if st == 0 {
			if st, err = readState(ctrl); err != nil {
				return ctrlReadError(err)
			}
		}
		switch st {
		case stateParamExchange:
			if err := writeJSON(ctrl, t.p); err != nil {
				return fail(113, err) // IESENDPARAMS
			}
			t.connected(time.Now(), ctrlMSS)
			t.rep.Start.ConnectingTo = &HostPort{Host: host, Port: port}
			t.out.printf(connectingFormat, host, port)
			if t.p.Reverse {
				t.out.printf(reverseFormat, host)
			}
		case stateCreateStreams:
			if err := c.createStreams(ctx); err != nil {
				return err
			}
		case stateTestStart:
			t.startTest(time.Now())
		case stateTestRunning:
			if t.begin.IsZero() {
				return &Error{Code: CodeMessage, Err: errors.New("TEST_RUNNING before TEST_START")}
			}
			if pending, err = c.runTest(ctx); err != nil {
				return err
			}
		case stateExchangeResults:
			if t.end.IsZero() {
				return &Error{Code: CodeMessage, Err: errors.New("EXCHANGE_RESULTS before the test ran")}
			}
			if err := writeJSON(ctrl, t.results()); err != nil {
				return fail(116, err) // IESENDRESULTS
			}
			var peer results
			if err := readJSON(ctrl, &peer); err != nil {
				return fail(CodeRecvResults, err)
			}
			if err := t.takeResults(peer); err != nil {
				return err
			}
			if c.cfg.GetServerOutput {
				t.rep.ServerOutputJSON, t.rep.ServerOutputText = peer.ServerOutputJSON, peer.ServerOutputText
			}
		case stateDisplayResults:
			t.halt()
			t.closeStreams()
			t.reportInterval()
			t.summarize()
			c.printServerOutput()
			t.out.printf("\n%s", iperfDone)
			return writeState(ctrl, stateIperfDone)
		case stateServerTerminate:
			if !t.end.IsZero() {
				t.reportInterval()
				t.summarize()
			}
			return &Error{Code: CodeServerTerm}
		case stateAccessDenied:
			return ErrAccessDenied
		case stateServerError:
			return readServerError(ctrl)
		default:
			return &Error{Code: CodeMessage, Err: errors.New("state " + strconv.Itoa(int(st)))}
		}
	}
}

func ctrlReadError(err error) error {
	if errors.Is(err, io.EOF) {
		return &Error{Code: CodeCtrlClose}
	}
	return fail(112, err) // IERECVMESSAGE
}

// createStreams connects the data streams one after another, the sending ones first as iperf3
// does: the server numbers them in the order it accepts them, and results match by number.
func (c *client) createStreams(ctx context.Context) error {
	t := c.t
	dirs := []bool{!t.p.Reverse}
	if t.p.Bidirectional {
		dirs = []bool{true, false}
	}
	network := ipNetwork("tcp", c.cfg.IPVersion)
	if t.udp {
		network = ipNetwork("udp", c.cfg.IPVersion)
	}
	for _, sender := range dirs {
		for i := 0; i < t.p.Parallel; i++ {
			conn, err := c.cfg.Network.DialContext(ctx, network, c.cfg.Server, t.opts)
			if err != nil {
				return fail(CodeStreamConnect, err)
			}
			if !t.udp {
				if _, err := conn.Write(t.cookie[:]); err != nil {
					conn.Close()
					return fail(105, err)
				}
			}
			if err := t.tune(conn, Options{}); err != nil {
				conn.Close()
				return err
			}
			if t.udp {
				if err := udpHandshake(ctx, conn, t.p.Len); err != nil {
					conn.Close()
					return err
				}
			}
			if _, err := t.addStream(conn, sender); err != nil {
				return err
			}
		}
	}
	return nil
}

// runTest moves data for the test's time (or until -n/-k), then sends TEST_END and returns the
// server's next state. The control channel is read meanwhile so that a server that gives up
// early is noticed.
func (c *client) runTest(ctx context.Context) (int8, error) {
	t := c.t
	t.run()
	ctrlMsgs := make(chan ctrlMsg, 1)
	go func() {
		// Exactly one byte: what follows EXCHANGE_RESULTS is read by run.
		st, err := readState(c.ctrl)
		ctrlMsgs <- ctrlMsg{st, err}
	}()
	var stopAt time.Time
	if t.p.Time > 0 {
		stopAt = t.begin.Add(time.Duration(t.p.Time+t.p.Omit) * time.Second)
	}
	// As iperf3's client, one that receives gives up when nothing arrives for --rcv-timeout.
	var idle time.Duration
	if t.mode != modeSender {
		idle = cmp.Or(c.cfg.RcvTimeout, defaultRcvTimeout*time.Millisecond)
	}
	m, err := t.measure(ctx, stopAt, idle, ctrlMsgs)
	if err != nil {
		return 0, err
	}
	if m != nil {
		// The server spoke first: it is terminating or failed.
		t.finish(time.Now())
		t.halt()
		if m.err != nil {
			return 0, ctrlReadError(m.err)
		}
		return m.state, nil
	}
	t.finish(time.Now())
	// A receiver keeps draining (no longer counted) so a server blocked in write hears TEST_END.
	if err := writeState(c.ctrl, stateTestEnd); err != nil {
		return 0, fail(111, err) // IESENDMESSAGE
	}
	r := <-ctrlMsgs
	if r.err != nil {
		return 0, ctrlReadError(r.err)
	}
	return r.state, nil
}

// printServerOutput prints what the server sent back for --get-server-output.
func (c *client) printServerOutput() {
	r := c.t.rep
	if len(r.ServerOutputJSON) > 0 {
		var b bytes.Buffer
		if json.Indent(&b, r.ServerOutputJSON, "", "\t") == nil {
			c.t.out.printf(serverOutputJSON, b.String())
		}
	}
	if r.ServerOutputText != nil {
		c.t.out.printf(serverOutputText, *r.ServerOutputText)
	}
}
