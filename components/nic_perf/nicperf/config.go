package nicperf

import (
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Schema is nic_perf's <config>: Genode's (period_ms, count, <policy>, <default-policy>,
// <nic-client>) and nicstack's older attributes for one session, which do not mix with
// Genode's nodes.
var Schema = &config.Schema{Type: "config",
	Attrs: append([]string{"period_ms", "count", "queue_size", "bulk_size", "spin"}, sessionAttrs...),
	Nodes: []*config.Schema{
		{Type: "policy", Attrs: []string{"label", "label_prefix", "label_suffix"}, Nodes: []*config.Schema{policyInterface, txSchema}},
		{Type: "default-policy", Nodes: []*config.Schema{policyInterface, txSchema}},
		{Type: "nic-client", Nodes: []*config.Schema{clientInterface, txSchema}},
	},
}

// sessionAttrs are the attributes of nicstack's own form, which says in the <config> itself
// what nic_perf does on its one kind of session.
var sessionAttrs = []string{
	"service", "session", "uplink_mac", "label", "mac", "flows", "ip", "tx", "protocol", "dst_ip", "dst_mac",
	"src_port", "dst_port", "size", "rate", "duration_ms", "ack", "churn",
}

// Config is what nic_perf does on one session (what a Perf runs) and, read from a whole
// <config>, beyond it (Component).
type Config struct {
	MAC header.MAC
	IP  [4]byte // answered for ARP and ICMP echo; the generator's source address
	// DHCP: it has no address of its own (Genode's <interface> without ip) and asks for one
	// by DHCP; until it has one, it neither answers nor generates.
	DHCP bool
	// DHCPClientIP is the address it hands its peer as a DHCP server (Genode's
	// dhcp_client_ip), from IP; zero: it answers no DHCP.
	DHCPClientIP [4]byte
	TX           bool // generate frames
	ICMP         bool // generate ICMP echo requests instead of UDP
	// TCP generates TCP connections instead of UDP: per connection SYN, ACK with data,
	// FIN|ACK and the last ACK (the source port advances per connection through Flows). A
	// nic_perf answers a SYN with SYN|ACK and a FIN with FIN|ACK, whatever its mode.
	TCP    bool
	DstIP  [4]byte
	DstMAC header.MAC // default: the router's MAC toward Nic clients
	// ResolveDstMAC makes the generator learn DstMAC by ARP for DstIP before it sends,
	// asking again every second until answered (Genode's <tx>).
	ResolveDstMAC bool
	SrcPort       uint16 // UDP source port, or the ICMP echo id
	Flows         int    // frames cycle through this many source ports (ids) from SrcPort
	DstPort       uint16
	Size          int           // Ethernet frame bytes
	Rate          uint64        // frames per second, 0: as fast as the stream takes them
	Duration      time.Duration // how long the generator sends (0: forever)
	// NoAck makes a client that takes frames and never acknowledges them (ack="no"): the
	// hostile peer of tests. It still answers ARP, so that a router sends to it.
	NoAck bool

	Component
}

// Component is what a whole <config> says beyond one session: which sessions nic_perf serves
// and requests, how it logs and when it ends.
type Component struct {
	// Service is the service it announces and serves ("Nic", or "Uplink" for the older
	// form's stand-in of a router): Genode's form serves Nic and Uplink, as Genode's does,
	// when it has a <policy> or a <default-policy>. "": it serves nothing.
	Service string
	// Genode is set for Genode's form, whose changes reach open sessions: each served one
	// runs what its policy now says, the <nic-client> session is requested anew.
	Genode bool
	// Policies and Default are Genode's <policy> and <default-policy>: what a session it
	// serves runs, chosen by its label (Config.Served). The older form has neither: every
	// session it serves runs the Config itself.
	Policies []Policy
	Default  *Config
	// Client makes it request a session and run the Config on it: Genode's <nic-client>, or
	// the older form without service.
	Client bool
	Label  string // the label of the session it requests
	// Session is the service a client requests: "Nic", or "Uplink" to stand in for a driver
	// (UplinkMAC is then the driver's MAC, the router's identity on that wire).
	Session   string
	UplinkMAC header.MAC
	// Period: how often it logs each session's packets and throughput (0: never); after
	// Count periods it exits with exit value 0. Count 0 is Genode's: no periods at all (no
	// log, no exit); Forever logs every period and never exits.
	Period time.Duration
	Count  int
	// Stream geometry of a client session.
	QueueSize, BulkSize int
	// Spin is how many polls a wait starts with before it sleeps (packetstream.Waiter.Spin):
	// 0 for a nic_perf that shares its CPU, where spinning only keeps its peer from running.
	Spin int
	// Churn makes a client that opens and closes this many sessions one after another
	// (churn="N"), without traffic: each is released as soon as it is up, and the next
	// requested. The counters sessions_opened and sessions_closed follow it.
	Churn int
	// periodSet and countSet: the config gave period_ms and count (Retime).
	periodSet, countSet bool
}

// minSize is the smallest frame that carries an IPv4 header and a UDP or ICMP echo header.
const minSize = header.EthLen + header.IPv4Len + header.UDPLen

// tcpMinSize is the smallest TCP frame with one byte of data.
const tcpMinSize = header.EthLen + header.IPv4Len + header.TCPLen + 1

// ParseConfig reads the <config> of nic_perf; an error makes cfg unusable. (What the schema
// does not know is component.Spec.Check's to report.) start, the <start>'s name, is unused.
// A <config> with a <policy>, <default-policy> or <nic-client> is Genode's form; one
// without is the older form.
func ParseConfig(n *config.Node, start string) (cfg Config, err error) {
	if n.Sub("policy") != nil || n.Sub("default-policy") != nil || n.Sub("nic-client") != nil {
		return parseGenode(n)
	}
	return parseOwn(n)
}

// parseOwn reads the older form: the <config>'s attributes are what every session runs.
func parseOwn(n *config.Node) (cfg Config, err error) {
	cfg.Service, cfg.Label, cfg.Session = n.String("service", ""), n.String("label", ""), n.String("session", "Nic")
	cfg.Client = cfg.Service == ""
	if cfg.Session != "Nic" && cfg.Session != "Uplink" {
		a, _ := n.Attr("session")
		return cfg, config.Errorf(a.Pos, "session=%q: want Nic or Uplink", cfg.Session)
	}
	if cfg.UplinkMAC, err = mac(n, "uplink_mac", header.MAC{2, 0, 0, 0, 0, 0xfe}); err != nil {
		return
	}
	if cfg.MAC, err = mac(n, "mac", header.MAC{2, 0, 0, 0, 0, 1}); err != nil {
		return
	}
	if cfg.DstMAC, err = mac(n, "dst_mac", header.MAC{2, 2, 2, 2, 2, 0}); err != nil {
		return
	}
	if cfg.IP, err = ip(n, "ip", [4]byte{10, 0, 1, 2}); err != nil {
		return
	}
	if cfg.DstIP, err = ip(n, "dst_ip", [4]byte{10, 0, 2, 2}); err != nil {
		return
	}
	if cfg.TX, err = n.Bool("tx", false); err != nil {
		return
	}
	switch p := n.String("protocol", "udp"); p {
	case "udp":
	case "icmp":
		cfg.ICMP = true
	case "tcp":
		cfg.TCP = true
	default:
		a, _ := n.Attr("protocol")
		return cfg, config.Errorf(a.Pos, "protocol=%q: want udp, icmp or tcp", p)
	}
	ack, err := n.Bool("ack", true)
	if err != nil {
		return cfg, err
	}
	cfg.NoAck = !ack
	num := numbers{n: n}
	cfg.SrcPort = uint16(num.get("src_port", 49152, 1, 65535))
	cfg.DstPort = uint16(num.get("dst_port", 12345, 1, 65535))
	cfg.Flows = int(num.get("flows", 1, 1, 65535))
	cfg.Size = int(num.get("size", 1500, minSize, maxSize))
	if num.err == nil && cfg.TCP && cfg.Size < tcpMinSize {
		a, _ := n.Attr("size")
		num.err = config.Errorf(a.Pos, "size=%d: a TCP frame with data has at least %d bytes", cfg.Size, tcpMinSize)
	}
	cfg.Rate = num.get("rate", 0, 0, 1<<32)
	cfg.Duration = time.Duration(num.get("duration_ms", 0, 0, 1<<32)) * time.Millisecond
	cfg.Churn = int(num.get("churn", 0, 0, 1<<20))
	// Scenarios of this form run until stopped: logging each second, never exiting.
	num.component(&cfg.Component, time.Second, 0)
	if cfg.Count == 0 {
		cfg.Count = Forever
	}
	return cfg, num.err
}

// maxSize is the largest frame the generator makes.
const maxSize = 9000

// numbers reads number attributes in ranges; the first error sticks (later reads return 0).
type numbers struct {
	n   *config.Node
	err error
}

func (r *numbers) get(name string, def, lo, hi uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, err := r.n.Number(name, def)
	if err == nil && (v < lo || v > hi) {
		a, _ := r.n.Attr(name)
		err = config.Errorf(a.Pos, "%s=%d is not in [%d, %d]", name, v, lo, hi)
	}
	r.err = err
	return v
}

// Forever is the Count of a nic_perf that logs every period and never exits (the older
// form's count 0).
const Forever = -1

// Retime is how c, from a later config of Genode's form, changes a running schedule, as
// Genode's nic_perf reads it: without period_ms or count, the running period and the periods
// still left stay.
func (c Component) Retime(period time.Duration, left int) (time.Duration, int) {
	if c.periodSet {
		period = c.Period
	}
	if c.countSet {
		left = c.Count
	}
	return period, max(left, 0)
}

// component reads what both forms share: period and count (with the form's defaults) and
// the geometry and waiting of the streams.
func (r *numbers) component(cfg *Component, period time.Duration, count uint64) {
	cfg.Period = time.Duration(r.get("period_ms", uint64(period/time.Millisecond), 0, 1<<32)) * time.Millisecond
	cfg.Count = int(r.get("count", count, 0, 1<<32))
	_, cfg.periodSet = r.n.Attr("period_ms")
	_, cfg.countSet = r.n.Attr("count")
	cfg.QueueSize = int(r.get("queue_size", 1024, 2, 1<<16))
	cfg.BulkSize = int(r.get("bulk_size", 1024*1600, 1600, 1<<30))
	cfg.Spin = int(r.get("spin", packetstream.DefaultSpin, 0, 1<<24))
}

func mac(n *config.Node, name string, def header.MAC) (header.MAC, error) {
	hw, ok, err := n.MAC(name)
	if err != nil || !ok {
		return def, err
	}
	return header.MAC(hw), nil
}

func ip(n *config.Node, name string, def [4]byte) ([4]byte, error) {
	a, ok, err := n.IPv4(name)
	if err != nil || !ok {
		return def, err
	}
	return a.As4(), nil
}
