package iperf

import (
	"errors"
	"fmt"
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
	Server   bool    // -s
	Client   string  // -c HOST
	Port     int     // -p
	Time     float64 // -t seconds
	Reverse  bool    // -R
	Parallel int     // -P
	JSON     bool    // -J
	OneOff   bool    // -1
	Length   int     // -l
	Interval float64 // -i seconds
	Bind     string  // -B
}

// AddFlags registers iperf3's flags, bound to c, with iperf3's defaults.
func (c *Command) AddFlags(f *pflag.FlagSet) {
	f.BoolVarP(&c.Server, "server", "s", false, "run as a server")
	f.StringVarP(&c.Client, "client", "c", "", "run as a client of the server at `HOST`")
	f.IntVarP(&c.Port, "port", "p", 5201, "server port")
	f.Float64VarP(&c.Time, "time", "t", 10, "seconds to transmit")
	f.BoolVarP(&c.Reverse, "reverse", "R", false, "reverse: the server sends, the client receives")
	f.IntVarP(&c.Parallel, "parallel", "P", 1, "number of parallel streams")
	f.BoolVarP(&c.JSON, "json", "J", false, "print results as iperf3-style JSON")
	f.BoolVarP(&c.OneOff, "one-off", "1", false, "server: handle one test, then exit")
	f.IntVarP(&c.Length, "length", "l", DefaultBlockSize, "bytes per read or write")
	f.Float64VarP(&c.Interval, "interval", "i", 1, "seconds between periodic reports")
	f.StringVarP(&c.Bind, "bind", "B", "", "server: address to listen on")
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

// Check reports a command that is neither or both of client and server.
func (c *Command) Check() error {
	if c.Server == (c.Client != "") {
		return errors.New("iperf: give exactly one of -s and -c HOST")
	}
	return nil
}

// ClientConfig is the client test the command describes, over network n.
func (c *Command) ClientConfig(n Network) ClientConfig {
	return ClientConfig{
		Network:   n,
		Server:    net.JoinHostPort(c.Client, strconv.Itoa(c.Port)),
		Duration:  time.Duration(c.Time * float64(time.Second)),
		Reverse:   c.Reverse,
		Parallel:  c.Parallel,
		BlockSize: c.Length,
		Interval:  c.IntervalDuration(),
	}
}

// ListenAddress is where the command's server listens.
func (c *Command) ListenAddress() string { return net.JoinHostPort(c.Bind, strconv.Itoa(c.Port)) }

// IntervalDuration is -i as a duration.
func (c *Command) IntervalDuration() time.Duration {
	return time.Duration(c.Interval * float64(time.Second))
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
