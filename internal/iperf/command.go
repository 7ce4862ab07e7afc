package iperf

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Command is an iperf3 command line: `nicstack iperf` parses its flags with it, and a guest's
// config can name the same command it would run with the real iperf3 in a namespace
// ("iperf3 -c 10.0.1.1 -R -t 10").
type Command struct {
	Server          bool    // -s
	Client          string  // -c HOST
	Port            int     // -p
	Time            float64 // -t seconds
	Bytes           uint64  // -n
	Blocks          uint64  // -k
	Reverse         bool    // -R
	Bidir           bool    // --bidir
	Parallel        int     // -P
	UDP             bool    // -u
	Rate            uint64  // -b bits per second
	Burst           int     // -b RATE/BURST
	Length          int     // -l
	Window          int     // -w
	MSS             int     // -M
	NoDelay         bool    // -N
	Congestion      string  // -C
	TOS             int     // -S
	Omit            int     // -O
	ZeroCopy        bool    // -Z
	GetServerOutput bool    // --get-server-output
	UDP64           bool    // --udp-counters-64bit
	Repeating       bool    // --repeating-payload
	JSON            bool    // -J
	OneOff          bool    // -1
	Interval        float64 // -i seconds; 0 reports only the whole test
	Format          string  // -f
	Bind            string  // -B: the server's listening address
	Version4        bool    // -4: IPv4 only
	Version6        bool    // -6: IPv6 only
	ForceFlush      bool    // --forceflush: our output is never held back, so nothing to do
	RcvTimeout      int     // --rcv-timeout ms: a receiving test that gets nothing this long fails
	SndTimeout      int     // --snd-timeout ms: TCP_USER_TIMEOUT; 0 keeps the system's

	set func(name string) bool // which flags the command line gave
}

// AddFlags registers iperf3's flags, bound to c, with iperf3's defaults.
func (c *Command) AddFlags(f *pflag.FlagSet) {
	f.BoolVarP(&c.Server, "server", "s", false, "run as a server")
	f.StringVarP(&c.Client, "client", "c", "", "run as a client of the server at `HOST`")
	f.IntVarP(&c.Port, "port", "p", 5201, "server port")
	f.Float64VarP(&c.Time, "time", "t", 10, "seconds to transmit")
	f.VarP(sizeFlag{&c.Bytes}, "bytes", "n", "bytes to transmit instead of -t (K, M, G suffixes)")
	f.VarP(sizeFlag{&c.Blocks}, "blockcount", "k", "blocks to transmit instead of -t (K, M, G suffixes)")
	f.BoolVarP(&c.Reverse, "reverse", "R", false, "reverse: the server sends, the client receives")
	f.BoolVar(&c.Bidir, "bidir", false, "bidirectional: client and server both send")
	f.IntVarP(&c.Parallel, "parallel", "P", 1, "number of parallel streams")
	f.BoolVarP(&c.UDP, "udp", "u", false, "use UDP rather than TCP")
	f.VarP(rateFlag{&c.Rate, &c.Burst}, "bitrate", "b", "target `RATE[/BURST]` in bits/s (K, M, G suffixes); UDP's default 1M, 0 unlimited")
	f.VarP(intSizeFlag{&c.Length}, "length", "l", "bytes per read or write (K, M suffixes); 128K for TCP, the path's MSS for UDP")
	f.VarP(intSizeFlag{&c.Window}, "window", "w", "socket buffer sizes (K, M suffixes)")
	f.IntVarP(&c.MSS, "set-mss", "M", 0, "TCP maximum segment size")
	f.BoolVarP(&c.NoDelay, "no-delay", "N", false, "set TCP_NODELAY")
	f.StringVarP(&c.Congestion, "congestion", "C", "", "TCP congestion control `ALGORITHM`")
	f.IntVarP(&c.TOS, "tos", "S", 0, "IP type of service (0x prefix for hex)")
	f.IntVarP(&c.Omit, "omit", "O", 0, "leave out the first `N` seconds from the results")
	f.BoolVarP(&c.ZeroCopy, "zerocopy", "Z", false, "send with sendfile")
	f.BoolVar(&c.GetServerOutput, "get-server-output", false, "print the server's report too")
	f.BoolVar(&c.UDP64, "udp-counters-64bit", false, "64-bit sequence numbers in UDP datagrams")
	f.BoolVar(&c.Repeating, "repeating-payload", false, "send iperf2's repeating pattern instead of random bytes")
	f.BoolVarP(&c.JSON, "json", "J", false, "print results as iperf3's JSON")
	f.BoolVarP(&c.OneOff, "one-off", "1", false, "server: handle one test, then exit")
	f.Float64VarP(&c.Interval, "interval", "i", 1, "seconds between periodic reports (0: none)")
	f.StringVarP(&c.Format, "format", "f", "", "units: k, m, g, t (bits) or K, M, G, T (bytes)")
	f.StringVarP(&c.Bind, "bind", "B", "", "server: address to listen on")
	f.BoolVarP(&c.Version4, "version4", "4", false, "only use IPv4")
	f.BoolVarP(&c.Version6, "version6", "6", false, "only use IPv6")
	f.BoolVar(&c.ForceFlush, "forceflush", false, "flush output at every interval (always so here)")
	f.IntVar(&c.RcvTimeout, "rcv-timeout", defaultRcvTimeout, "idle timeout for receiving data, ms")
	f.IntVar(&c.SndTimeout, "snd-timeout", 0, "timeout for unacknowledged TCP data, ms (0: the system's)")
	c.set = func(name string) bool { return f.Changed(name) }
}

// ParseCommand reads an iperf3 command line; a leading "iperf3" or "iperf" is skipped.
func ParseCommand(args []string) (*Command, error) {
	if len(args) > 0 && (args[0] == "iperf3" || args[0] == "iperf" || strings.HasSuffix(args[0], "/iperf3")) {
		args = args[1:]
	}
	c := &Command{}
	f := pflag.NewFlagSet("iperf", pflag.ContinueOnError)
	f.SetOutput(discard{})
	c.AddFlags(f)
	if err := f.Parse(args); err != nil {
		return nil, fmt.Errorf("iperf: %w", err)
	}
	if f.NArg() > 0 {
		return nil, fmt.Errorf("iperf: unexpected argument %q", f.Arg(0))
	}
	return c, c.Check()
}

// clientOnly are the flags iperf3 refuses on a server (its client_flag).
var clientOnly = []string{"udp", "bitrate", "time", "bytes", "blockcount", "length", "parallel", "reverse", "bidir",
	"window", "set-mss", "no-delay", "tos", "omit", "zerocopy", "congestion", "get-server-output", "repeating-payload"}

// Check refuses what iperf3 refuses on its command line, with its messages.
func (c *Command) Check() error {
	err := c.check()
	if err != nil {
		return fmt.Errorf("iperf: parameter error - %w", err)
	}
	return nil
}

func (c *Command) check() error {
	set := c.set
	if set == nil {
		set = func(string) bool { return false }
	}
	switch {
	case set("rcv-timeout") && (c.RcvTimeout < minRcvTimeout || c.RcvTimeout > maxTime*1000):
		return &Error{Code: CodeRcvTimeout}
	case c.SndTimeout < 0 || c.SndTimeout > maxTime*1000:
		return &Error{Code: CodeSndTimeout}
	case c.Server && c.Client != "":
		return &Error{Code: CodeServerClient}
	case !c.Server && c.Client == "":
		return &Error{Code: CodeNoRole}
	case c.Port < 1 || c.Port > 65535:
		return &Error{Code: CodeBadPort}
	case c.Interval != 0 && (c.Interval < 0.1 || c.Interval > 60):
		return &Error{Code: CodeInterval}
	case c.Format != "" && (len(c.Format) != 1 || !validFormat(c.Format[0])):
		return &Error{Code: CodeBadFormat}
	case c.Client != "" && c.OneOff:
		return &Error{Code: CodeServerOnly}
	}
	if c.Version4 && c.Version6 {
		return errors.New("-4 and -6 exclude each other")
	}
	if !c.Server && set("bind") {
		return errors.New("-B binds a server's listener only; a client's local address is not supported")
	}
	if c.Server {
		for _, name := range clientOnly {
			if set(name) {
				return &Error{Code: CodeClientOnly}
			}
		}
		return nil
	}
	if c.Time > maxTime {
		return &Error{Code: CodeDuration}
	}
	if set("rcv-timeout") && !c.Reverse && !c.Bidir {
		return &Error{Code: CodeRcvTimeoutRx}
	}
	if set("time") && (c.Bytes > 0 || c.Blocks > 0) {
		return &Error{Code: CodeEndConditions}
	}
	if c.Length > maxBlockSize { // -l 0 is iperf3's default
		return &Error{Code: CodeBlockSize}
	}
	p, err := c.params()
	if err != nil {
		return err
	}
	return p.check(true)
}

func (c *Command) params() (params, error) {
	cfg := c.ClientConfig(nil)
	return cfg.params()
}

// ClientConfig is the client test the command describes, over network n.
func (c *Command) ClientConfig(n Network) ClientConfig {
	set := c.set
	if set == nil {
		set = func(string) bool { return false }
	}
	cfg := ClientConfig{
		Network:  n,
		Server:   net.JoinHostPort(c.Client, strconv.Itoa(c.Port)),
		UDP:      c.UDP,
		Duration: time.Duration(math.Min(c.Time, maxTime+1) * float64(time.Second)),
		Bytes:    c.Bytes, Blocks: c.Blocks, Omit: c.Omit,
		Reverse: c.Reverse, Bidir: c.Bidir, Parallel: c.Parallel,
		BlockSize: c.Length, Rate: c.Rate, Burst: c.Burst,
		Options:  Options{Window: c.Window, MSS: c.MSS, NoDelay: c.NoDelay, Congestion: c.Congestion, TOS: c.TOS},
		ZeroCopy: c.ZeroCopy, UDP64: c.UDP64, Repeating: c.Repeating, GetServerOutput: c.GetServerOutput,
		Interval: c.IntervalDuration(), Format: c.format(), JSON: c.JSON,
		RcvTimeout: c.rcvTimeout(), SndTimeout: time.Duration(c.SndTimeout) * time.Millisecond,
		IPVersion: c.ipVersion(),
	}
	if (c.Bytes > 0 || c.Blocks > 0) && !set("time") {
		cfg.Duration = 0 // -n or -k ends the test instead
	}
	if c.UDP && !set("bitrate") {
		cfg.Rate = defaultUDPRate
	}
	return cfg
}

// NewServer is the server the command describes, over network n; its output is up to the caller.
func (c *Command) NewServer(n Network) *Server {
	return &Server{Network: n, Interval: c.IntervalDuration(), Format: c.format(), JSON: c.JSON, OneOff: c.OneOff,
		RcvTimeout: c.rcvTimeout(), SndTimeout: time.Duration(c.SndTimeout) * time.Millisecond}
}

// rcvTimeout is --rcv-timeout as a duration; a Command not made by AddFlags has iperf3's default.
func (c *Command) rcvTimeout() time.Duration {
	if c.RcvTimeout == 0 {
		return defaultRcvTimeout * time.Millisecond
	}
	return time.Duration(c.RcvTimeout) * time.Millisecond
}

// ipVersion is 4 for -4, 6 for -6, else 0.
func (c *Command) ipVersion() int {
	switch {
	case c.Version4:
		return 4
	case c.Version6:
		return 6
	}
	return 0
}

// ListenNetwork is the network the command's server listens on: "tcp6" with -6 (IPv6 only),
// "tcp4" with -4, else "tcp" (both, as iperf3 listens on :: without -4 or -6).
func (c *Command) ListenNetwork() string { return ipNetwork("tcp", c.ipVersion()) }

// ListenAddress is where the command's server listens.
func (c *Command) ListenAddress() string { return net.JoinHostPort(c.Bind, strconv.Itoa(c.Port)) }

// IntervalDuration is -i as a duration; -i 0 (reports of the whole test only) is negative.
func (c *Command) IntervalDuration() time.Duration {
	if c.Interval == 0 {
		return -1
	}
	return time.Duration(c.Interval * float64(time.Second))
}

func (c *Command) format() byte {
	if c.Format == "" {
		return 0
	}
	return c.Format[0]
}

// sizeFlag, intSizeFlag and rateFlag read iperf3's K, M, G and T suffixes.
type sizeFlag struct{ v *uint64 }

func (f sizeFlag) String() string {
	if f.v == nil {
		return "0"
	}
	return strconv.FormatUint(*f.v, 10)
}
func (f sizeFlag) Set(s string) (err error) { *f.v, err = ParseSize(s); return err }
func (sizeFlag) Type() string               { return "size" }

type intSizeFlag struct{ v *int }

func (f intSizeFlag) String() string {
	if f.v == nil {
		return "0"
	}
	return strconv.Itoa(*f.v)
}

func (f intSizeFlag) Set(s string) error {
	v, err := ParseSize(s)
	if err != nil {
		return err
	}
	if v > math.MaxInt32 {
		return fmt.Errorf("iperf: %s is too large", s)
	}
	*f.v = int(v)
	return nil
}
func (intSizeFlag) Type() string { return "size" }

type rateFlag struct {
	rate  *uint64
	burst *int
}

func (f rateFlag) String() string {
	if f.rate == nil {
		return "0"
	}
	return strconv.FormatUint(*f.rate, 10)
}
func (f rateFlag) Set(s string) (err error) { *f.rate, *f.burst, err = ParseRate(s); return err }
func (rateFlag) Type() string               { return "rate" }

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
