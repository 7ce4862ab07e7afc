// Package rr measures request/response latency through a path as netperf's TCP_RR does: over
// one TCP connection the client sends a request of a transaction's size, the server sends the
// same bytes back, and the next request leaves only once the whole response came. The client
// times every transaction; their percentiles are the path's latency as an application sees it
// (both stacks and everything between them, interrupt moderation's delays included).
package rr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nicstack/nicstack/internal/iperf"
)

// DefaultPort is the server's port unless -p says otherwise: clear of iperf3's 5201.
const DefaultPort = 5210

// Command is an rr command line, for `nicstack rr` and a guest's rr attribute:
//
//	-s [-p PORT] [-4 | -6]                                   serve: send every byte back
//	-c HOST [-p PORT] [-l SIZE,...] [-t SECONDS] [-4 | -6]   time transactions of each size for -t each
type Command struct {
	Server bool
	Client string
	Port   int
	Sizes  []int         // -l: transaction sizes in bytes, each measured in turn
	Time   time.Duration // -t: per size
	// Version4 and Version6 (-4, -6) keep to one IP version, as iperf3's flags: a server
	// listens on that family only, a client connects over it only.
	Version4, Version6 bool
}

// AddFlags registers the flags, bound to c, with their defaults.
func (c *Command) AddFlags(f *pflag.FlagSet) {
	c.Sizes, c.Time = []int{1, 1024}, 2*time.Second
	f.BoolVarP(&c.Server, "server", "s", false, "run as a server: send every byte back")
	f.StringVarP(&c.Client, "client", "c", "", "time transactions against the server at `HOST`")
	f.IntVarP(&c.Port, "port", "p", DefaultPort, "server port")
	f.VarP((*sizes)(&c.Sizes), "length", "l", "transaction `SIZES` in bytes, comma-separated (K suffix)")
	f.VarP((*seconds)(&c.Time), "time", "t", "seconds per size")
	f.BoolVarP(&c.Version4, "version4", "4", false, "only use IPv4")
	f.BoolVarP(&c.Version6, "version6", "6", false, "only use IPv6")
}

// ParseCommand reads an rr command line (a guest's rr attribute).
func ParseCommand(args []string) (*Command, error) {
	c := &Command{}
	f := pflag.NewFlagSet("rr", pflag.ContinueOnError)
	f.SetOutput(io.Discard)
	c.AddFlags(f)
	if err := f.Parse(args); err != nil {
		return nil, fmt.Errorf("rr: %w", err)
	}
	if f.NArg() > 0 {
		return nil, fmt.Errorf("rr: unexpected argument %q", f.Arg(0))
	}
	return c, c.Check()
}

// Check refuses a command that names no role or both.
func (c *Command) Check() error {
	switch {
	case c.Server == (c.Client != ""):
		return errors.New("rr: give one of -s (serve) and -c HOST (measure)")
	case c.Port < 1 || c.Port > 65535:
		return fmt.Errorf("rr: -p %d: expected 1..65535", c.Port)
	case c.Time <= 0:
		return errors.New("rr: -t must be positive")
	case c.Version4 && c.Version6:
		return errors.New("rr: -4 and -6 exclude each other")
	}
	return nil
}

// Address is the server's "host:port" (a client's), or the address a server listens on.
func (c *Command) Address() string { return net.JoinHostPort(c.Client, strconv.Itoa(c.Port)) }

// Network is where the command connects or listens: "tcp", or "tcp4" or "tcp6" with -4 or -6.
func (c *Command) Network() string {
	switch {
	case c.Version4:
		return "tcp4"
	case c.Version6:
		return "tcp6"
	}
	return "tcp"
}

// MaxSize bounds a transaction: one buffer each way, allocated once per connection.
const MaxSize = 1 << 20

type sizes []int

func (s *sizes) String() string {
	var parts []string
	for _, n := range *s {
		parts = append(parts, strconv.Itoa(n))
	}
	return strings.Join(parts, ",")
}

func (s *sizes) Set(v string) error {
	*s = nil
	for _, part := range strings.Split(v, ",") {
		n, err := iperf.ParseSize(part)
		if err != nil || n < 1 || n > MaxSize {
			return fmt.Errorf("%q: expected a size of 1 byte to %d bytes", part, MaxSize)
		}
		*s = append(*s, int(n))
	}
	return nil
}

func (s *sizes) Type() string { return "sizes" }

type seconds time.Duration

func (d *seconds) String() string {
	return strconv.FormatFloat(time.Duration(*d).Seconds(), 'g', -1, 64)
}

func (d *seconds) Set(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f > 86400 {
		return fmt.Errorf("%q: expected seconds (0 < t <= 86400)", v)
	}
	*d = seconds(f * float64(time.Second))
	return nil
}

func (d *seconds) Type() string { return "seconds" }

// Serve sends back every byte each connection accepted on ln brings, until ctx ends.
func Serve(ctx context.Context, n iperf.Network, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			defer conn.Close()
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			defer stop()
			// A response waits for no acknowledgement of the one before.
			if _, err := n.Tune(conn, iperf.Options{NoDelay: true}); err != nil {
				return
			}
			buf := make([]byte, 64<<10)
			for {
				k, err := conn.Read(buf)
				if k > 0 {
					if _, werr := conn.Write(buf[:k]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// Result is one size's transactions.
type Result struct {
	Size         int
	Transactions int
	P50, P99     time.Duration
	P999         time.Duration // p99.9
}

func (r Result) String() string {
	return fmt.Sprintf("%d bytes: %d transactions, round trip p50 %v, p99 %v, p99.9 %v",
		r.Size, r.Transactions, r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.P999.Round(time.Microsecond))
}

// Run times transactions of size bytes against the server at address (on network: "tcp",
// "tcp4", "tcp6") until the deadline, at least one.
func Run(ctx context.Context, n iperf.Network, network, address string, size int, until time.Time) (Result, error) {
	if size < 1 || size > MaxSize {
		return Result{Size: size}, fmt.Errorf("rr: size %d: expected 1..%d", size, MaxSize)
	}
	conn, err := n.DialContext(ctx, network, address, iperf.Options{NoDelay: true})
	if err != nil {
		return Result{Size: size}, fmt.Errorf("rr: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	// A transaction may outlast the deadline: by a retransmission timeout at worst (1 s for
	// a lost SYN, 200 ms after), and a loaded machine's delays.
	if err := conn.SetDeadline(until.Add(5 * time.Second)); err != nil {
		return Result{Size: size}, fmt.Errorf("rr: %w", err)
	}
	req, resp := make([]byte, size), make([]byte, size)
	rtts := make([]time.Duration, 0, 1<<16)
	for t0 := time.Now(); len(rtts) == 0 || t0.Before(until); {
		if _, err := conn.Write(req); err != nil {
			return Result{Size: size}, fmt.Errorf("rr: after %d transactions: %w", len(rtts), err)
		}
		if _, err := io.ReadFull(conn, resp); err != nil {
			return Result{Size: size}, fmt.Errorf("rr: after %d transactions: %w", len(rtts), err)
		}
		t1 := time.Now()
		rtts = append(rtts, t1.Sub(t0))
		t0 = t1
	}
	return summarize(size, rtts), nil
}

// summarize is the percentiles of rtts by nearest rank; it sorts rtts.
func summarize(size int, rtts []time.Duration) Result {
	r := Result{Size: size, Transactions: len(rtts)}
	if len(rtts) == 0 {
		return r
	}
	slices.Sort(rtts)
	rank := func(q float64) time.Duration {
		return rtts[max(0, int(math.Ceil(q*float64(len(rtts))))-1)]
	}
	r.P50, r.P99, r.P999 = rank(0.5), rank(0.99), rank(0.999)
	return r
}
