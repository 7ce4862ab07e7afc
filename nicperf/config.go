package nicperf

import (
	"time"

	"github.com/nicstack/nicstack/router/header"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Schema is nic_perf's <config>.
var Schema = &config.Schema{Type: "config", Attrs: []string{
	"service", "session", "uplink_mac", "label", "mac", "flows", "ip", "tx", "protocol", "dst_ip", "dst_mac", "src_port", "dst_port",
	"size", "rate", "duration_ms", "period_ms", "queue_size", "bulk_size", "spin", "ack", "churn",
}}

// Config is what one nic_perf does.
type Config struct {
	Service string // "Nic": serve sessions (the peer of a direct run); "": be a Nic client
	Label   string // the client session's label
	// Session is the service a client requests: "Nic", or "Uplink" to stand in for a driver
	// (UplinkMAC is then the driver's MAC, the router's identity on that wire).
	Session   string
	UplinkMAC header.MAC
	MAC       header.MAC
	IP        [4]byte // answered for ARP and ICMP echo; the generator's source address
	TX        bool    // generate frames
	ICMP      bool    // generate ICMP echo requests instead of UDP
	// TCP generates TCP connections instead of UDP: per connection SYN, ACK with data,
	// FIN|ACK and the last ACK (the source port advances per connection through Flows). A
	// nic_perf answers a SYN with SYN|ACK and a FIN with FIN|ACK, whatever its mode.
	TCP     bool
	DstIP   [4]byte
	DstMAC  header.MAC // default: the router's MAC toward Nic clients
	SrcPort uint16     // UDP source port, or the ICMP echo id
	Flows   int        // frames cycle through this many source ports (ids) from SrcPort
	DstPort uint16
	Size    int           // Ethernet frame bytes
	Rate    uint64        // frames per second, 0: as fast as the stream takes them
	Period  time.Duration // how often rates are logged (0: never)
	// Duration: how long the generator sends (0: forever).
	Duration time.Duration
	// Stream geometry of a client session.
	QueueSize, BulkSize int
	// Spin is how many polls a wait starts with before it sleeps (packetstream.Waiter.Spin):
	// 0 for a nic_perf that shares its CPU, where spinning only keeps its peer from running.
	Spin int
	// NoAck makes a client that takes frames and never acknowledges them (ack="no"): the
	// hostile peer of tests. It still answers ARP, so that a router sends to it.
	NoAck bool
	// Churn makes a client that opens and closes this many sessions one after another
	// (churn="N"), without traffic: each is released as soon as it is up, and the next
	// requested. The counters sessions_opened and sessions_closed follow it.
	Churn int
}

// minSize is the smallest frame that carries an IPv4 header and a UDP or ICMP echo header.
const minSize = header.EthLen + 20 + 8

// tcpMinSize is the smallest TCP frame with one byte of data.
const tcpMinSize = header.EthLen + 20 + 20 + 1

// ParseConfig reads the <config> of nic_perf; an error makes cfg unusable. (What the schema
// does not know is component.Spec.Check's to report.) start, the <start>'s name, is unused.
func ParseConfig(n *config.Node, start string) (cfg Config, err error) {
	cfg = Config{Service: n.String("service", ""), Label: n.String("label", ""), Session: n.String("session", "Nic")}
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
	var v uint64
	num := func(name string, def, lo, hi uint64) uint64 {
		if err != nil {
			return 0
		}
		if v, err = n.Number(name, def); err == nil && (v < lo || v > hi) {
			a, _ := n.Attr(name)
			err = config.Errorf(a.Pos, "%s=%d is not in [%d, %d]", name, v, lo, hi)
		}
		return v
	}
	cfg.SrcPort = uint16(num("src_port", 49152, 1, 65535))
	cfg.DstPort = uint16(num("dst_port", 12345, 1, 65535))
	cfg.Flows = int(num("flows", 1, 1, 65535))
	cfg.Size = int(num("size", 1500, minSize, 9000))
	if err == nil && cfg.TCP && cfg.Size < tcpMinSize {
		a, _ := n.Attr("size")
		err = config.Errorf(a.Pos, "size=%d: a TCP frame with data has at least %d bytes", cfg.Size, tcpMinSize)
	}
	cfg.Rate = num("rate", 0, 0, 1<<32)
	cfg.Duration = time.Duration(num("duration_ms", 0, 0, 1<<32)) * time.Millisecond
	cfg.Period = time.Duration(num("period_ms", 1000, 0, 1<<32)) * time.Millisecond
	cfg.QueueSize = int(num("queue_size", 1024, 2, 1<<16))
	cfg.BulkSize = int(num("bulk_size", 1024*1600, 1600, 1<<30))
	cfg.Spin = int(num("spin", packetstream.DefaultSpin, 0, 1<<24))
	cfg.Churn = int(num("churn", 0, 0, 1<<20))
	return cfg, err
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
