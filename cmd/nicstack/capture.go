package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/capture"
	"github.com/nicstack/nicstack/runtime/pcap"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

func init() {
	var (
		socket, name, write string
		count               uint64
		duration            time.Duration
	)
	cmd := &cobra.Command{
		Use:   "capture COMPONENT|SESSION",
		Short: "Tap a component's sessions, or one session, of the running scenario: print each frame or write pcap",
		Long: `Capture asks the running supervisor to have a component copy every frame of its sessions
(or of the one session, by the id nicstack status shows) to this command, without a restart:
each frame the component gets or sends, at the session's packet stream. Frames print as
Genode's nic_dump logs them, "(to <- from) ETH ...", IPv6 and ICMPv6 too, with the time since
the capture began; -w writes them to a pcap file instead (-w - to stdout, for tshark -r -).
It stops after -c frames, after --duration, at Ctrl-C, or when the component or session goes
away. A capture that cannot keep up loses frames, never slows the scenario, and says how many.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := supervisor.FindSocket(socket, name)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, duration)
				defer cancel()
			}
			return runCapture(ctx, path, args[0], write, count, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&name, "name", "s", "", "tap the run started with --name NAME (a systemd instance: nicstack@NAME)")
	f.StringVar(&socket, "socket", "", "tap the supervisor at this Unix socket (default: the unnamed run's, else the one named run)")
	f.StringVarP(&write, "write", "w", "", "write a pcap file (- for stdout) instead of printing")
	f.Uint64VarP(&count, "count", "c", 0, "stop after this many frames (0: no limit)")
	f.DurationVar(&duration, "duration", 0, "stop after this long (0: no limit)")
	root.AddCommand(cmd)
}

// lineStyle is how capture prints a frame: every protocol in its default style, IPv6 and
// ICMPv6 too (nic_dump's <config default="default"/>).
var lineStyle = header.LogConfig{Eth: header.StyleDefault, ARP: header.StyleDefault, IPv4: header.StyleDefault, DHCP: header.StyleDefault,
	UDP: header.StyleDefault, ICMP: header.StyleDefault, TCP: header.StyleDefault, IPv6: header.StyleDefault, ICMP6: header.StyleDefault}

// capturer reads the capture socket and writes what it reads.
type capturer struct {
	st        supervisor.Status
	component string
	pcap      io.Writer     // -w: the records go here
	lines     *bufio.Writer // otherwise the frames print here
	line      []byte
	cfg       header.LogConfig
	timing    *header.Timing
	names     map[uint64][2]string // session -> the tapping component and its peer
	frames    uint64
	lost      map[[2]uint64]uint64 // by session and direction: the last count a message gave
}

func runCapture(ctx context.Context, socket, target, write string, count uint64, stdout, stderr io.Writer) error {
	st, err := supervisor.QueryStatus(socket) // it names the sessions' sides
	if err != nil {
		return err
	}
	stream, err := supervisor.RequestCapture(ctx, socket, target)
	if err != nil {
		return err
	}
	defer stream.Close() // ends the capture at the component
	c := &capturer{st: st, component: stream.Component, names: map[uint64][2]string{}, lost: map[[2]uint64]uint64{}, cfg: lineStyle}
	what := "every session of " + stream.Component
	if len(stream.Sessions) == 1 {
		what = fmt.Sprintf("session %d at %s", stream.Sessions[0], stream.Component)
	}
	switch write {
	case "":
		c.lines = bufio.NewWriter(stdout)
	case "-":
		c.pcap = stdout
	default:
		f, err := os.Create(write)
		if err != nil {
			return err
		}
		defer f.Close()
		c.pcap = f
	}
	if c.pcap != nil {
		if _, err := c.pcap.Write(pcap.AppendFileHeader(nil, capture.Snaplen)); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "capturing %s (Ctrl-C stops)\n", what)
	start := time.Now()
	c.timing = header.NewTiming(start)
	end, err := c.read(stream, count)
	if ctx.Err() != nil && end == "" { // the end of ctx ends the stream
		end, err = "stopped", nil
		if ctx.Err() == context.DeadlineExceeded {
			end = "the duration is over"
		}
	}
	var lost uint64
	for _, n := range c.lost {
		lost += n
	}
	fmt.Fprintf(stderr, "%d frames captured, %d lost, in %v: %s\n", c.frames, lost, time.Since(start).Round(time.Millisecond), end)
	return err
}

// read reads messages until count frames (0: no limit), the end of the capture, or an error,
// and says why it stopped.
func (c *capturer) read(stream *supervisor.CaptureStream, count uint64) (string, error) {
	for {
		b, err := stream.Next()
		if err == io.EOF {
			return "the capture ended (its session or component went away)", nil
		}
		if err != nil {
			return "", err
		}
		m, err := capture.ParseMessage(b)
		if err != nil {
			return "", err
		}
		c.lost[[2]uint64{m.Session, uint64(m.Dir)}] = m.Lost
		for rest := m.Records; len(rest) > 0; {
			r, next, err := pcap.NextRecord(rest)
			if err != nil {
				return "", fmt.Errorf("session %d: %w", m.Session, err)
			}
			if err := c.frame(m, r, rest[:len(rest)-len(next)]); err != nil {
				return "", err
			}
			rest = next
			if c.frames++; c.frames == count {
				return "the count is reached", c.flush()
			}
		}
		if err := c.flush(); err != nil {
			return "", err
		}
	}
}

// frame writes one record: its bytes to the pcap file, or its line.
func (c *capturer) frame(m capture.Message, r pcap.Record, record []byte) error {
	if c.pcap != nil {
		_, err := c.pcap.Write(record)
		return err
	}
	self, peer := c.sides(m.Session)
	to, from := self, peer
	if m.Dir == capture.Out {
		to, from = peer, self
	}
	c.line = header.AppendLine(c.line[:0], to, from, r.Frame, &c.cfg, c.timing, r.Time)
	_, err := c.lines.Write(c.line)
	return err
}

func (c *capturer) flush() error {
	if c.lines != nil {
		return c.lines.Flush()
	}
	return nil
}

// sides names the tapping component and its peer on session id, as the status read at the
// start shows them: a client by its label's first part, a server by the request.
func (c *capturer) sides(id uint64) (self, peer string) {
	if n, ok := c.names[id]; ok {
		return n[0], n[1]
	}
	self, peer = c.component, "session "+strconv.FormatUint(id, 10)
	for _, cs := range c.st.Components {
		if cs.Name != c.component {
			continue
		}
		for _, s := range cs.Sessions {
			if s.ID == id && s.Role == "server" {
				peer, _, _ = strings.Cut(s.Label, " -> ")
			}
		}
		for _, r := range cs.Requests {
			if r.Session == id && r.Server != "" {
				peer = r.Server
			}
		}
	}
	c.names[id] = [2]string{self, peer}
	return self, peer
}
