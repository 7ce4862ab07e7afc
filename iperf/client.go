package iperf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// ClientConfig describes one test, with iperf3's flag names in the comments.
type ClientConfig struct {
	Network   Network       // where to connect; nil means Kernel
	Server    string        // -c host and -p port, as "host:port"
	Duration  time.Duration // -t; 0 means 10 s
	Reverse   bool          // -R: the server sends
	Parallel  int           // -P; 0 means 1
	BlockSize int           // -l; 0 means DefaultBlockSize
	Interval  time.Duration // -i; 0 means 1 s
	// OnInterval, when set, sees every interval as it closes (for live text output).
	OnInterval func(Interval)
}

// ErrAccessDenied means the server is busy with another test.
var ErrAccessDenied = errors.New("iperf: the server is busy running a test, try again later")

// maxStreams is iperf3's own limit on -P.
const maxStreams = 128

// RunClient runs one test against an iperf3 server and returns its report. On an error after
// the test started, the report holds what was measured and its Error field says what failed.
func RunClient(ctx context.Context, cfg ClientConfig) (*Report, error) {
	if cfg.Network == nil {
		cfg.Network = Kernel
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 1
	}
	if cfg.Parallel > maxStreams {
		return nil, fmt.Errorf("iperf: at most %d parallel streams", maxStreams)
	}
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = DefaultBlockSize
	}
	host, port, err := net.SplitHostPort(cfg.Server)
	if err != nil {
		return nil, fmt.Errorf("iperf: server address: %w", err)
	}
	ck, err := newCookie()
	if err != nil {
		return nil, err
	}
	ctrl, err := cfg.Network.DialContext(ctx, "tcp", cfg.Server)
	if err != nil {
		return nil, fmt.Errorf("iperf: connecting to %s: %w", cfg.Server, err)
	}
	defer ctrl.Close()
	// Cancelling ctx unblocks whatever the control channel waits for.
	stopCancel := context.AfterFunc(ctx, func() { _ = ctrl.SetDeadline(time.Now()) })
	defer stopCancel()

	c := &client{cfg: cfg, ctrl: ctrl, cookie: ck}
	defer c.closeStreams()
	rep, err := c.run(ctx)
	if rep != nil {
		p, _ := strconv.Atoi(port)
		rep.Start.ConnectingTo = &HostPort{Host: host, Port: p}
		if err != nil {
			rep.Error = err.Error()
		}
	}
	if ctx.Err() != nil && err != nil {
		err = ctx.Err()
	}
	return rep, err
}

type client struct {
	cfg     ClientConfig
	ctrl    net.Conn
	cookie  cookie
	params  params
	streams []*stream
	meter   *meter
}

func (c *client) run(ctx context.Context) (*Report, error) {
	if _, err := c.ctrl.Write(c.cookie[:]); err != nil {
		return nil, err
	}
	c.params = params{TCP: true, Time: int(c.cfg.Duration.Round(time.Second) / time.Second), Parallel: c.cfg.Parallel,
		Reverse: c.cfg.Reverse, Len: c.cfg.BlockSize, PacingTimer: 1000, ClientVersion: Version}
	if c.params.Time == 0 {
		c.params.Time = 1
	}
	var rep *Report
	var pending int8 // a state runTest already read
	for {
		st := pending
		pending = 0
		if st == 0 {
			var err error
			if st, err = readState(c.ctrl); err != nil {
				return rep, fmt.Errorf("iperf: control connection: %w", err)
			}
		}
		switch st {
		case stateParamExchange:
			if err := writeJSON(c.ctrl, c.params); err != nil {
				return rep, err
			}
		case stateCreateStreams:
			if err := c.createStreams(ctx); err != nil {
				return rep, err
			}
		case stateTestStart:
			c.meter = newMeter(c.streams, c.cfg.Interval, c.cfg.OnInterval)
			rep = &Report{Start: newStart(c.cookie, c.params, c.streams, time.Now())}
		case stateTestRunning:
			if c.meter == nil || !c.meter.start.IsZero() {
				return rep, errors.New("iperf: TEST_RUNNING out of order")
			}
			next, err := c.runTest(ctx)
			if err != nil {
				return rep, fmt.Errorf("iperf: during the test: %w", err)
			}
			pending = next
		case stateExchangeResults:
			if c.meter == nil {
				return rep, errors.New("iperf: results before the test ran")
			}
			if err := writeJSON(c.ctrl, localResults(c.meter)); err != nil {
				return rep, err
			}
			var peer results
			if err := readJSON(c.ctrl, &peer); err != nil {
				return rep, fmt.Errorf("iperf: reading server results: %w", err)
			}
			rep.Intervals = c.meter.intervals
			rep.End = buildEnd(c.meter, peer)
		case stateDisplayResults:
			c.closeStreams()
			err := writeState(c.ctrl, stateIperfDone)
			return rep, err
		case stateAccessDenied:
			return rep, ErrAccessDenied
		case stateServerTerminate:
			return rep, errors.New("iperf: the server has terminated")
		case stateServerError:
			var code [8]byte // i_errno and errno, big-endian
			if _, err := io.ReadFull(c.ctrl, code[:]); err != nil {
				return rep, errors.New("iperf: server error")
			}
			return rep, fmt.Errorf("iperf: server error (i_errno %d, errno %d)",
				int32(binary.BigEndian.Uint32(code[:4])), int32(binary.BigEndian.Uint32(code[4:])))
		default:
			return rep, fmt.Errorf("iperf: unexpected control state %d", st)
		}
	}
}

// createStreams connects the data streams one after another: the server numbers them in the
// order it accepts them, and results are matched by that number.
func (c *client) createStreams(ctx context.Context) error {
	for i := 0; i < c.cfg.Parallel; i++ {
		conn, err := c.cfg.Network.DialContext(ctx, "tcp", c.cfg.Server)
		if err != nil {
			return fmt.Errorf("iperf: data stream: %w", err)
		}
		if _, err := conn.Write(c.cookie[:]); err != nil {
			conn.Close()
			return err
		}
		c.streams = append(c.streams, newStream(streamID(i), conn, !c.cfg.Reverse, c.cfg.BlockSize))
	}
	return nil
}

// runTest moves data for the configured time, then sends TEST_END and returns the server's next
// state. The control channel is read meanwhile so that a server that gives up early is noticed.
func (c *client) runTest(ctx context.Context) (int8, error) {
	c.meter.begin()
	for _, s := range c.streams {
		go s.run()
	}
	type reply struct {
		st  int8
		err error
	}
	next := make(chan reply, 1)
	go func() {
		// Exactly one byte: what follows EXCHANGE_RESULTS is read by run.
		st, err := readState(c.ctrl)
		next <- reply{st, err}
	}()
	timer := time.NewTimer(c.cfg.Duration)
	defer timer.Stop()
	select {
	case <-timer.C:
	case r := <-next:
		c.stopStreams()
		if r.err != nil {
			return 0, r.err
		}
		return r.st, nil // SERVER_TERMINATE or an error state, handled by run
	case <-ctx.Done():
		c.stopStreams()
		return 0, ctx.Err()
	}
	c.meter.finish()
	for _, s := range c.streams {
		if s.sender {
			s.halt()
		}
	}
	// A receiver keeps draining (no longer counted) so a server blocked in write hears TEST_END.
	if err := writeState(c.ctrl, stateTestEnd); err != nil {
		return 0, err
	}
	r := <-next
	return r.st, r.err
}

func (c *client) stopStreams() {
	for _, s := range c.streams {
		s.halt()
	}
}

func (c *client) closeStreams() {
	for _, s := range c.streams {
		s.conn.Close()
	}
}
