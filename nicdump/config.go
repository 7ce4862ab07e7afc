package nicdump

import (
	"strconv"
	"time"

	"github.com/nicstack/nicstack/runtime/config"
)

// Schema is nic_dump's <config>: Genode's attributes, and pcap, ours.
var Schema = &config.Schema{Type: "config", Attrs: []string{
	"uplink", "downlink", "time", "default", "eth", "arp", "ipv4", "dhcp", "udp", "icmp", "tcp", "pcap",
}}

// Config is what one nic_dump does.
type Config struct {
	// Uplink and Downlink name the two sides in the log: a frame from the client reads
	// "(uplink <- downlink) ...".
	Uplink, Downlink string
	Time             bool // end each line with the ms since start and since the frame before
	Log              LogConfig
	// Pcap, when set, is a file every frame passing either way is also written to (ours:
	// Genode's nic_dump only logs).
	Pcap string
}

// maxLabel is the longest label Genode's nic_dump takes (its Interface_label).
const maxLabel = 64

// ParseConfig reads nic_dump's <config>; an error makes cfg unusable. start is unused.
func ParseConfig(n *config.Node, start string) (cfg Config, err error) {
	cfg.Uplink, cfg.Downlink = n.String("uplink", "uplink"), n.String("downlink", "downlink")
	for _, name := range []string{"uplink", "downlink"} {
		if a, ok := n.Attr(name); ok && (a.Value == "" || len(a.Value) > maxLabel) {
			return cfg, config.Errorf(a.Pos, "%s=%q: want a label of 1 to %d characters", name, a.Value, maxLabel)
		}
	}
	if cfg.Time, err = n.Bool("time", false); err != nil {
		return cfg, err
	}
	def, err := style(n, "default", Default)
	if err != nil {
		return cfg, err
	}
	for _, f := range []struct {
		name string
		to   *Style
	}{{"eth", &cfg.Log.Eth}, {"arp", &cfg.Log.ARP}, {"ipv4", &cfg.Log.IPv4}, {"dhcp", &cfg.Log.DHCP},
		{"udp", &cfg.Log.UDP}, {"icmp", &cfg.Log.ICMP}, {"tcp", &cfg.Log.TCP}} {
		if *f.to, err = style(n, f.name, def); err != nil {
			return cfg, err
		}
	}
	if a, ok := n.Attr("pcap"); ok {
		if a.Value == "" {
			return cfg, config.Errorf(a.Pos, "pcap=\"\": want the path of the capture file")
		}
		cfg.Pcap = a.Value
	}
	return cfg, nil
}

func style(n *config.Node, name string, def Style) (Style, error) {
	a, ok := n.Attr(name)
	if !ok {
		return def, nil
	}
	s, ok := ParseStyle(a.Value)
	if !ok {
		return def, config.Errorf(a.Pos, "%s=%q: want no, name, default or all", name, a.Value)
	}
	return s, nil
}

// AppendLine appends the log line of frame passed from side from to side to, as Genode's
// nic_dump writes it: "(to <- from) " and the frame, then, when timing is not nil, the time
// suffix, and a newline.
func AppendLine(b []byte, to, from string, frame []byte, c *LogConfig, timing *Timing, now time.Time) []byte {
	b = append(b, '(')
	b = append(b, to...)
	b = append(b, " <- "...)
	b = append(b, from...)
	b = append(b, ") "...)
	b = AppendFrame(b, frame, c)
	if timing != nil {
		b = timing.Append(b, now)
	}
	return append(b, '\n')
}

// Timing writes Genode's " time N ms (Δ M ms)": the milliseconds since start and since the
// frame before, in either direction (the first frame's are since start).
type Timing struct {
	start  time.Time
	lastMS int64
}

// NewTiming counts from start.
func NewTiming(start time.Time) *Timing { return &Timing{start: start} }

// Append appends the suffix of a frame seen at now.
func (t *Timing) Append(b []byte, now time.Time) []byte {
	ms := now.Sub(t.start).Milliseconds()
	b = append(b, " time "...)
	b = strconv.AppendInt(b, ms, 10)
	b = append(b, " ms (Δ "...)
	b = strconv.AppendInt(b, ms-t.lastMS, 10)
	t.lastMS = ms
	return append(b, " ms)"...)
}
