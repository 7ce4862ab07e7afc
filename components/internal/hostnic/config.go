package hostnic

import (
	"hash/fnv"
	"net"
	"strconv"
	"time"

	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/netns"
	ps "github.com/nicstack/nicstack/runtime/packetstream"
)

// TapSchema is linux_nic's <config>:
//
//	<config mac="02:..." label="..." netns="lan" address="198.18.0.1/24" gateway="..."
//	        address6="2001:db8:ffff::2/64" gateway6="..." tap_mtu="65520" offload="yes" exec="iperf3 -s"/>
//
// Everything but mac and label is the TAP's (the supervisor's "Tap" service arguments): the
// Linux side of the wire lives in the namespace netns the supervisor makes. address6 and
// gateway6 (in 2001:db8::/32 or fd00::/8) are its IPv6 address, set without duplicate address
// detection so that a server there binds it at once, and default route.
var TapSchema = &config.Schema{Type: "config", Attrs: []string{
	"mac", "label", "netns", "address", "gateway", "address6", "gateway6", "tap_mtu", "offload", "exec"}}

// PacketSchema is packet_nic's <config>:
//
//	<config mac="02:..." label="..." netns="lan" address="198.18.0.1/24" gateway="..." mtu="1500"
//	        rx_irq_throttle="651"/>
//
// rx_irq_throttle is in a NIC's ITR units of 256 ns (0: off): the least interval between two
// RX wakeups, and (rounded up to whole ms) the retire timeout of an RX block.
var PacketSchema = &config.Schema{Type: "config", Attrs: []string{
	"mac", "label", "netns", "address", "gateway", "address6", "gateway6", "mtu", "exec", "rx_irq_throttle"}}

// DefaultRxIrqThrottle is Genode's ITR value: 651 x 256 ns = 166.7 µs.
const DefaultRxIrqThrottle = 651

// Config is a linux_nic or packet_nic <config>.
type Config struct {
	MAC   net.HardwareAddr  // the NIC's address: the router's identity on this wire
	Label string            // the Uplink session's label
	Args  map[string]string // the device service's arguments
	// packet_nic's RX throttle (zero for linux_nic).
	RxMinInterval, RetireTimeout time.Duration
}

// Stream is the geometry of the Uplink session's streams: Genode's 1024 queue entries and a
// bulk buffer for some 190 super-frames of 64 KiB in flight (an 8 ms stall at 12 Gbit/s; see
// the netns guest's).
var Stream = ps.Config{QueueSize: 1024, BulkSize: 12 << 20}

// ParseConfig reads the <config> of a component of kind k whose <start> is called start (the
// MAC's default is derived from it); an error makes the config unusable.
func (k *Kind) ParseConfig(n *config.Node, start string) (cfg Config, err error) {
	if n == nil {
		n = &config.Node{Type: "config"}
	}
	cfg = Config{Label: n.String("label", ""), Args: map[string]string{}}
	mac, ok, err := n.MAC("mac")
	if err != nil {
		return cfg, err
	}
	if !ok {
		mac = DeriveMAC(start)
	} else if mac[0]&1 != 0 {
		a, _ := n.Attr("mac")
		return cfg, config.Errorf(a.Pos, "mac=%q is a multicast address", a.Value)
	}
	cfg.MAC = mac
	for _, k := range []string{"netns", "address", "gateway", "address6", "gateway6", "exec"} {
		if v, ok := n.Attr(k); ok {
			cfg.Args[k] = v.Value
		}
	}
	if _, _, err := n.Prefix("address"); err != nil {
		return cfg, err
	}
	if _, _, err := n.IPv4("gateway"); err != nil {
		return cfg, err
	}
	if err := checkIPv6(n); err != nil {
		return cfg, err
	}
	mtuAttr := "mtu"
	if k == TapNIC {
		mtuAttr = "tap_mtu"
		offload, err := n.Bool("offload", true)
		if err != nil {
			return cfg, err
		}
		cfg.Args["offload"] = yesNo(offload)
	} else {
		itr, err := n.Number("rx_irq_throttle", DefaultRxIrqThrottle)
		if err != nil {
			return cfg, err
		}
		if itr > 0xffff {
			a, _ := n.Attr("rx_irq_throttle")
			return cfg, config.Errorf(a.Pos, "rx_irq_throttle=%d does not fit the 16-bit ITR interval (at most 65535)", itr)
		}
		cfg.RxMinInterval = time.Duration(itr) * 256 * time.Nanosecond
		cfg.RetireTimeout = (cfg.RxMinInterval + time.Millisecond - 1).Truncate(time.Millisecond)
	}
	if n.Has(mtuAttr) {
		mtu, err := n.Number(mtuAttr, 1500)
		if err == nil && (mtu < 68 || mtu > 65535) {
			a, _ := n.Attr(mtuAttr)
			err = config.Errorf(a.Pos, "%s=%d is not in [68, 65535]", mtuAttr, mtu)
		}
		if err != nil {
			return cfg, err
		}
		cfg.Args["mtu"] = strconv.FormatUint(mtu, 10)
	}
	return cfg, nil
}

// DeriveMAC makes a locally administered unicast address from name, the same for every run.
func DeriveMAC(name string) net.HardwareAddr {
	h := fnv.New64a()
	h.Write([]byte("nicstack " + name))
	s := h.Sum(nil)
	return net.HardwareAddr{0x02, s[0], s[1], s[2], s[3], s[4]}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// checkIPv6 refuses an address6 that is no IPv6 prefix a scenario may have (netns.ScenarioAddr), and a gateway6 that
// is no unicast IPv6 address.
func checkIPv6(n *config.Node) error {
	p, ok, err := n.Prefix6("address6")
	if err != nil {
		return err
	}
	if ok && !netns.ScenarioAddr(p.Addr()) {
		a, _ := n.Attr("address6")
		return config.Errorf(a.Pos, "address6=%q: want an address in 2001:db8::/32 or fd00::/8", a.Value)
	}
	g, ok, err := n.IPv6("gateway6")
	if err != nil {
		return err
	}
	if ok && (g.IsMulticast() || g.IsUnspecified() || g.IsLoopback()) {
		a, _ := n.Attr("gateway6")
		return config.Errorf(a.Pos, "gateway6=%q: want a router's unicast address", a.Value)
	}
	return nil
}
