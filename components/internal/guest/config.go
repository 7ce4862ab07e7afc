// Package guest is the config of the vm and remote_host components: which guest runs behind
// the session (an embedded TCP/IP stack or a Linux namespace), its addresses and its iperf
// and request/response tests. It links no TCP/IP stack, so that the table of components (and `nicstack check`) can
// hold it; the guests themselves are components/internal/guests.
package guest

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/bits"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/nicstack/nicstack/drivers/vhostuser"
	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/internal/rr"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/netns"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Schema is the <config> of the vm and remote_host components:
//
//	<config guest="embedded" mtu="1500" iperf="-c 198.18.0.2 -R -t 10 -J"/>          vm, DHCP
//	<config address="198.18.0.2/24" iperf="-s" session="Uplink" uplink_mac="02:00:00:00:00:fe"/>
//	<config iperf="-c 198.18.0.2 -t 10" rr="-c 198.18.0.2 -l 1,1K"/>   round trips too (package rr)
//	<config rr="-c 198.18.0.2" rr_load_sec="10" rr_load_omit_sec="3"/>   beside another guest's test
//	<config iperf="-c 198.18.0.2 -t 10" iperf_start="2026-12-05T10:00:05Z"/>   not before then
//	<config address="198.18.0.2/24" iperf="-s" rr="-s"/>
//	<config address="198.18.0.2/24" iperf="-s -p 5201" iperf_servers="32"/>   ports 5201-5232
//	<config address="198.18.0.2/24" iperf="-s" qdisc="fq_codel"/>   a Linux host's default egress
//	<config address6="2001:db8::2/64" gateway6="fe80::1" iperf="-c 2001:db8:ffff::2 -6 -t 5"/>   static IPv6
//	<config guest="netns" tap_address="10.0.1.2/24" tap_address6="fd00:1::2/64" tap_gateway6="fd00:1::1"/>
//	<config guest="netns" netns="vm" tap_address="10.0.1.2/24" exec="iperf3 -c 198.18.0.2 -R"/>
//	<config guest="netns" netns_path="/run/netns/c1" tap_address="10.0.1.2/24"/>   a container's
//	<config guest="netns" netns_path="/run/netns/c1" ifname="eth0" tap_address="10.0.1.2/24"/>   as CNI names it
//	<config guest="netns" netns_path="/run/netns/c1" ifname="eth0" tap_address="dhcp"/>   the supervisor leases it
//	<config guest="netns" netns_path="/run/netns/c1" tap_address="none"/>   up, left to the namespace's owner
//	<config guest="stream" socket="vm.sock"/>   a QEMU's -netdev stream connects there
//	<config guest="vhost-user" socket="vm.sock"/>   a QEMU's -netdev vhost-user connects there
//	<config guest="vhost-user" socket="vm.sock" queues="4"/>   four queue pairs (multi-queue)
//
// A netns guest's iperf is run as the real iperf3 in its namespace (unless exec names a command),
// its client tried again while the server is not reachable or busy, as an embedded guest's; rr runs in an embedded guest only. An embedded guest with both an iperf and an rr client
// times round trips during the iperf test and then on the idle path (see guests.Host).
// rr_load_sec (and rr_load_omit_sec) give a guest with an rr client and no iperf client the
// times of an iperf test that another guest starts when this one starts (`bench iperf
// --latency-guest separate`): it times its "load" round trips where that test would have
// its own, then, once that test has ended, the idle ones. iperf_start (RFC 3339) holds an embedded guest's iperf client
// until that time, so that many guests' tests start together (`bench scale`).
// tx_buf_size and rx_buf_size size an embedded guest's session buffers, as Genode's lwip
// takes them (bytes, K or M; default Genode's 1600 KiB, 1024 frames of 1600 bytes): the
// queue of each stream gets a descriptor per 1600 bytes, so a larger buffer holds as many more
// full-sized frames (`bench scale --far-end-rx-buf`: a far end that gets the CPU in slices
// takes in what the wire brought meanwhile).
// iperf_servers="N" makes an embedded guest's iperf server N servers, on ports -p to -p+N-1:
// each serves one test at a time as iperf3 does, so a far end that N guests measure against
// at once (`nicstack bench scale`) runs one per guest.
// qdisc="fq_codel" puts an embedded guest's frames through fq_codel (router/fqcodel, Linux's
// defaults) over a byte queue limit (netdev/dql) before its session's TX stream, as a Debian
// host's default qdisc over a driver with BQL: a model of such a host, the far end of the
// seed scenario (docs/isolation.md); "none" (the default) writes them into the stream in
// order, waiting while it is full. tx_bql_limit_max, with qdisc="fq_codel", caps that byte
// queue limit in bytes as Linux's byte_queue_limits/limit_max does: by default 125000, what
// a 1 Gbit/s wire sends in 1 ms (docs/isolation.md); 0: no cap but half the stream's
// buffer.
//
// Both kinds are dual-stack: an embedded guest has a link-local IPv6 address from its MAC and
// takes SLAAC addresses and default routers from router advertisements, beside address6 and
// gateway6 if given; a netns guest's TAP accepts router advertisements as Linux does, beside
// tap_address6 and tap_gateway6 if given (docs/ipv6.md).
var Schema = &config.Schema{Type: "config", Attrs: []string{
	"guest", "mtu", "offload", "mac", "address", "gateway", "address6", "gateway6", "iperf", "iperf_servers", "iperf_start", "tx_buf_size", "rx_buf_size", "qdisc", "tx_bql_limit_max", "rr", "rr_load_sec", "rr_load_omit_sec", "report",
	"session", "label", "uplink_mac", "netns", "netns_path", "ifname", "tap_address", "tap_gateway",
	"tap_address6", "tap_gateway6", "exec", "socket", "queues",
}}

// Config is one guest.
type Config struct {
	Guest   string // "embedded", "netns", "stream" or "vhost-user"
	MTU     int
	Offload bool // embedded: send TSO super-frames; netns: the TAP's offloads
	MAC     net.HardwareAddr
	// Address is the embedded stack's static address; invalid: ask the session's DHCP server.
	Address netip.Prefix
	Gateway netip.Addr
	// Address6 is the embedded stack's static IPv6 address, beside its link-local one and the
	// SLAAC ones; Gateway6 a default router for it (a router's link-local address will do).
	Address6 netip.Prefix
	Gateway6 netip.Addr
	Iperf    *iperf.Command // nil: no test
	// IperfServers is how many iperf servers an embedded guest runs, on consecutive ports
	// from Iperf's (1 unless iperf_servers says more).
	IperfServers int
	// TX and RX are an embedded guest's session streams (tx_buf_size, rx_buf_size).
	TX, RX packetstream.Config
	// Qdisc is an embedded guest's egress: QdiscNone or QdiscFQCodel.
	Qdisc string
	// TxBQLLimitMax caps the byte queue limit below QdiscFQCodel, bytes (0: no cap);
	// DefaultTxBQLLimitMax unless tx_bql_limit_max says otherwise.
	TxBQLLimitMax uint32
	// IperfStart holds an embedded iperf client until then; zero: it starts at once.
	IperfStart time.Time
	RR         *rr.Command // nil: no request/response test
	// RRLoad and RRLoadOmit are the test (-t and -O) an rr client without an iperf client
	// times its load phase beside; 0: none, idle round trips only.
	RRLoad, RRLoadOmit time.Duration
	Report             string // file the iperf report is written to as JSON
	// Session is the service requested: "Nic", or "Uplink" to sit where a driver would, with
	// UplinkMAC as the router's identity on that wire.
	Session   string
	Label     string
	UplinkMAC net.HardwareAddr
	// The netns guest: the namespace the supervisor makes (or, NetnsPath, an existing one it
	// puts the TAP into: a container's, under /run/netns or /var/run/netns), the TAP's
	// Linux-side address ("dhcp": the supervisor takes a lease from the router's DHCP server
	// for it) and default route, and a command run in the namespace once the TAP is up. Ifname names the TAP inside the namespace (a CNI runtime's CNI_IFNAME); "": the
	// supervisor's tapN.
	Netns      string
	NetnsPath  string
	Ifname     string
	TapAddress string
	TapGateway string
	// TapAddress6 and TapGateway6 are the TAP's static IPv6 address and default router, in
	// 2001:db8::/32 or fd00::/8.
	TapAddress6 string
	TapGateway6 string
	Exec        string
	// Socket is where a stream or vhost-user guest's QEMU connects: the supervisor listens there
	// (relative: in the run folder) and hands the socket over; default START.sock.
	Socket string
	// Queues is how many queue pairs a vhost-user guest's device offers (multi-queue), 1 to
	// vhostuser.MaxQueuePairs.
	Queues int
}

// ParseConfig reads a guest's <config>; start (the <start>'s name) seeds the default MAC.
func ParseConfig(n *config.Node, start string) (Config, error) {
	c := Config{Guest: n.String("guest", "embedded"), Session: n.String("session", "Nic"), Label: n.String("label", ""),
		Report: n.String("report", ""), Netns: n.String("netns", start), TapAddress: n.String("tap_address", ""),
		TapGateway: n.String("tap_gateway", ""), Exec: n.String("exec", ""), NetnsPath: n.String("netns_path", ""),
		Ifname: n.String("ifname", ""), TapAddress6: n.String("tap_address6", ""), TapGateway6: n.String("tap_gateway6", "")}
	if c.Guest != "embedded" && c.Guest != "netns" && c.Guest != "stream" && c.Guest != "vhost-user" {
		a, _ := n.Attr("guest")
		return c, config.Errorf(a.Pos, "guest=%q: expected embedded, netns, stream or vhost-user", c.Guest)
	}
	if c.Guest == "stream" || c.Guest == "vhost-user" {
		c.Socket = n.String("socket", start+".sock")
		if a, ok := n.Attr("socket"); ok && (c.Socket == "" || strings.ContainsRune(c.Socket, 0) || len(c.Socket) > 107) {
			return c, config.Errorf(a.Pos, "socket=%q: want a path of 1 to 107 bytes", c.Socket)
		}
	}
	queues, err := n.Number("queues", 1)
	if err != nil {
		return c, err
	}
	c.Queues = int(queues)
	if a, ok := n.Attr("queues"); ok && (c.Guest != "vhost-user" || queues < 1 || queues > vhostuser.MaxQueuePairs) {
		return c, config.Errorf(a.Pos, "queues=%q: want a vhost-user guest's queue pairs, 1 to %d", a.Value, vhostuser.MaxQueuePairs)
	}
	if c.Session != "Nic" && c.Session != "Uplink" {
		a, _ := n.Attr("session")
		return c, config.Errorf(a.Pos, "session=%q: expected Nic or Uplink", c.Session)
	}
	mtu, err := n.Number("mtu", 1500)
	if err != nil {
		return c, err
	}
	if mtu < 576 || mtu > 65000 {
		a, _ := n.Attr("mtu")
		return c, config.Errorf(a.Pos, "mtu=%d is out of range (576..65000)", mtu)
	}
	c.MTU = int(mtu)
	if c.Offload, err = n.Bool("offload", c.Guest == "netns"); err != nil {
		return c, err
	}
	mac, ok, err := n.MAC("mac")
	if err != nil {
		return c, err
	}
	if !ok {
		mac = defaultMAC(start)
	}
	c.MAC = mac
	if c.Address, _, err = n.Prefix("address"); err != nil {
		return c, err
	}
	if c.Gateway, _, err = n.IPv4("gateway"); err != nil {
		return c, err
	}
	if err := c.parseIPv6(n); err != nil {
		return c, err
	}
	if c.Session == "Uplink" {
		if c.UplinkMAC, ok, err = n.MAC("uplink_mac"); err != nil {
			return c, err
		}
		if !ok {
			return c, config.Errorf(n.Pos, "session=\"Uplink\" needs uplink_mac (the router's MAC on the wire)")
		}
	}
	if a, ok := n.Attr("iperf"); ok {
		if c.Iperf, err = iperf.ParseCommand(strings.Fields(a.Value)); err != nil {
			return c, config.Errorf(a.Pos, "iperf=%q: %v", a.Value, err)
		}
	}
	servers, err := n.Number("iperf_servers", 1)
	if err != nil {
		return c, err
	}
	c.IperfServers = int(servers)
	if a, ok := n.Attr("iperf_servers"); ok {
		if c.Iperf == nil || !c.Iperf.Server || c.Guest != "embedded" {
			return c, config.Errorf(a.Pos, "iperf_servers: only for an embedded guest's iperf server (iperf=\"-s ...\")")
		}
		if servers < 1 || servers > maxIperfServers || c.Iperf.Port+int(servers)-1 > 65535 {
			return c, config.Errorf(a.Pos, "iperf_servers=%d: want 1 to %d servers on ports %d and up to 65535", servers, maxIperfServers, c.Iperf.Port)
		}
	}
	for _, b := range []struct {
		name string
		cfg  *packetstream.Config
	}{{"tx_buf_size", &c.TX}, {"rx_buf_size", &c.RX}} {
		if *b.cfg, err = bufSize(n, b.name, c.Guest); err != nil {
			return c, err
		}
	}
	c.Qdisc = n.String("qdisc", QdiscNone)
	if a, ok := n.Attr("qdisc"); ok {
		switch {
		case c.Guest != "embedded":
			return c, config.Errorf(a.Pos, "qdisc: only for an embedded guest (a netns guest's is its namespace's: tc)")
		case c.Qdisc != QdiscNone && c.Qdisc != QdiscFQCodel:
			return c, config.Errorf(a.Pos, "qdisc=%q: want %s or %s", c.Qdisc, QdiscNone, QdiscFQCodel)
		}
	}
	if c.Qdisc == QdiscFQCodel {
		c.TxBQLLimitMax = DefaultTxBQLLimitMax
	}
	if a, ok := n.Attr("tx_bql_limit_max"); ok {
		v, err := config.ParseNumber(a.Value)
		switch {
		case c.Qdisc != QdiscFQCodel:
			return c, config.Errorf(a.Pos, "tx_bql_limit_max: only with qdisc=%q (the byte queue limit below it)", QdiscFQCodel)
		case err != nil || v > math.MaxUint32:
			return c, config.Errorf(a.Pos, "tx_bql_limit_max=%q: want a byte count (0: no cap)", a.Value)
		}
		c.TxBQLLimitMax = uint32(v)
	}
	if a, ok := n.Attr("rr"); ok {
		if c.Guest == "netns" {
			return c, config.Errorf(a.Pos, "rr runs in an embedded guest only (guest=\"netns\")")
		}
		if c.RR, err = rr.ParseCommand(strings.Fields(a.Value)); err != nil {
			return c, config.Errorf(a.Pos, "rr=%q: %v", a.Value, err)
		}
	}
	if a, ok := n.Attr("iperf_start"); ok {
		if c.IperfStart, err = time.Parse(time.RFC3339Nano, a.Value); err != nil {
			return c, config.Errorf(a.Pos, "iperf_start=%q: want a time as RFC 3339 writes it (2026-12-05T10:00:05Z)", a.Value)
		}
		if c.Iperf == nil || c.Iperf.Server || c.Guest != "embedded" {
			return c, config.Errorf(a.Pos, "iperf_start: only for an embedded guest's iperf client")
		}
	}
	if err := c.parseRRLoad(n); err != nil {
		return c, err
	}
	if a, ok := n.Attr("ifname"); ok && (c.Guest != "netns" || !validIfname(c.Ifname)) {
		return c, config.Errorf(a.Pos, "ifname=%q: want a netns guest's interface name of 1 to 15 characters, without '/', ':' or white space", c.Ifname)
	}
	if c.Guest == "netns" && c.TapAddress == "" {
		return c, config.Errorf(n.Pos, "guest=\"netns\" needs tap_address (the Linux side's address, CIDR, dhcp, or none)")
	}
	if a, ok := n.Attr("tap_gateway"); ok && c.TapAddress == "dhcp" {
		return c, config.Errorf(a.Pos, "tap_gateway with tap_address=\"dhcp\": the lease's router option is the gateway")
	}
	if a, ok := n.Attr("tap_gateway"); ok && c.TapAddress == "none" {
		return c, config.Errorf(a.Pos, "tap_gateway with tap_address=\"none\": the interface stays unconfigured")
	}
	if a, ok := n.Attr("iperf"); ok && c.Guest == "netns" && c.Exec == "" {
		c.Exec = realIperf3(c.Iperf, strings.Join(strings.Fields(a.Value), " "))
	}
	return c, nil
}

// parseRRLoad reads rr_load_sec and rr_load_omit_sec: for an rr client without an iperf client.
func (c *Config) parseRRLoad(n *config.Node) error {
	load, err := n.Number("rr_load_sec", 0)
	if err != nil {
		return err
	}
	omit, err := n.Number("rr_load_omit_sec", 0)
	if err != nil {
		return err
	}
	a, ok := n.Attr("rr_load_sec")
	if o, has := n.Attr("rr_load_omit_sec"); has && !ok {
		return config.Errorf(o.Pos, "rr_load_omit_sec without rr_load_sec")
	}
	if !ok {
		return nil
	}
	switch {
	case c.RR == nil || c.RR.Server || c.Iperf != nil:
		return config.Errorf(a.Pos, "rr_load_sec: only for an rr client without an iperf client (with one, its own test is the load)")
	case load < 1 || load > 86400:
		return config.Errorf(a.Pos, "rr_load_sec=%d: want 1 to 86400 seconds", load)
	case omit > iperf.MaxOmit:
		return config.Errorf(a.Pos, "rr_load_omit_sec=%d: want 0 to %d seconds", omit, iperf.MaxOmit)
	}
	c.RRLoad, c.RRLoadOmit = time.Duration(load)*time.Second, time.Duration(omit)*time.Second
	return nil
}

// An embedded guest's egress (qdisc).
const (
	QdiscNone    = "none"
	QdiscFQCodel = "fq_codel"
	// DefaultTxBQLLimitMax is the cap on the byte queue limit below qdisc="fq_codel": what a
	// 1 Gbit/s wire (every scenario's in deploy/) sends in 1 ms, room for the NIC model's
	// acknowledgements of 64 frames at a time (97 KB). Uncapped, the limit covered the far
	// end's own late wakeups, 3-4 ms standing in the stream where no scheduler sees it.
	DefaultTxBQLLimitMax = 125000
)

// maxIperfServers bounds iperf_servers: each is a listener and goroutines in the guest.
const maxIperfServers = 1024

// parseIPv6 reads address6 and gateway6 (an embedded guest's) and tap_address6 and
// tap_gateway6 (a netns guest's).
func (c *Config) parseIPv6(n *config.Node) error {
	var err error
	if c.Address6, _, err = n.Prefix6("address6"); err != nil {
		return err
	}
	if c.Gateway6, _, err = n.IPv6("gateway6"); err != nil {
		return err
	}
	for _, name := range []string{"address6", "gateway6"} {
		if a, ok := n.Attr(name); ok && c.Guest != "embedded" {
			return config.Errorf(a.Pos, "%s is an embedded guest's; a netns guest's TAP takes tap_%s", name, name)
		}
	}
	if a, ok := n.Attr("address6"); ok && !unicast6(c.Address6.Addr()) {
		return config.Errorf(a.Pos, "address6=%q: want a global or unique local unicast address (the link-local one comes from the MAC)", a.Value)
	}
	if a, ok := n.Attr("gateway6"); ok && (c.Gateway6.IsMulticast() || c.Gateway6.IsUnspecified() || c.Gateway6.IsLoopback()) {
		return config.Errorf(a.Pos, "gateway6=%q: want a router's unicast address", a.Value)
	}
	p, _, err := n.Prefix6("tap_address6")
	if err != nil {
		return err
	}
	g, _, err := n.IPv6("tap_gateway6")
	if err != nil {
		return err
	}
	for _, name := range []string{"tap_address6", "tap_gateway6"} {
		if a, ok := n.Attr(name); ok && c.Guest != "netns" {
			return config.Errorf(a.Pos, "%s is a netns guest's; an embedded guest takes %s", name, name[len("tap_"):])
		}
	}
	if a, ok := n.Attr("tap_address6"); ok && !netns.ScenarioAddr(p.Addr()) {
		return config.Errorf(a.Pos, "tap_address6=%q: want an address in 2001:db8::/32 or fd00::/8", a.Value)
	}
	if a, ok := n.Attr("tap_gateway6"); ok && (g.IsMulticast() || g.IsUnspecified() || g.IsLoopback()) {
		return config.Errorf(a.Pos, "tap_gateway6=%q: want a router's unicast address", a.Value)
	}
	return nil
}

// unicast6 says whether a is an address a host may be given: unicast, neither link-local
// nor loopback nor unspecified.
func unicast6(a netip.Addr) bool {
	return !a.IsMulticast() && !a.IsUnspecified() && !a.IsLoopback() && !a.IsLinkLocalUnicast()
}

// validIfname says whether Linux takes name for an interface (its dev_valid_name, which
// CNI's ValidateInterfaceName follows).
func validIfname(name string) bool {
	return len(name) >= 1 && len(name) <= 15 && name != "." && name != ".." &&
		!strings.ContainsAny(name, "/: \t\n\v\f\r")
}

// defaultMAC is a locally administered address from the component's name, so that guests of
// one scenario differ without configuring one.
func defaultMAC(name string) net.HardwareAddr {
	h := fnv.New32a()
	h.Write([]byte(name))
	s := h.Sum32()
	return net.HardwareAddr{0x02, 0x4e, byte(s >> 24), byte(s >> 16), byte(s >> 8), byte(s)}
}

// TapArgs are the arguments of the Tap session (the contract's netns, netns_path, address,
// gateway, address6, gateway6, mtu, offload, exec, and the Tap service's ifname).
func (cfg Config) TapArgs() map[string]string {
	args := map[string]string{"netns": cfg.Netns, "address": cfg.TapAddress, "mtu": strconv.Itoa(cfg.MTU),
		"offload": map[bool]string{false: "no", true: "yes"}[cfg.Offload]}
	if cfg.TapGateway != "" {
		args["gateway"] = cfg.TapGateway
	}
	if cfg.TapAddress6 != "" {
		args["address6"] = cfg.TapAddress6
	}
	if cfg.TapGateway6 != "" {
		args["gateway6"] = cfg.TapGateway6
	}
	if cfg.NetnsPath != "" {
		args["netns_path"] = cfg.NetnsPath
	}
	if cfg.Exec != "" {
		args["exec"] = cfg.Exec
	}
	if cfg.Ifname != "" {
		args["ifname"] = cfg.Ifname
	}
	return args
}

func (c Config) String() string {
	return fmt.Sprintf("guest=%s mac=%s mtu=%d offload=%v", c.Guest, c.MAC, c.MTU, c.Offload)
}

// bufSize is the stream an embedded guest's attribute name (tx_buf_size, rx_buf_size) sizes:
// Genode's default without it; with it, that many bytes of buffer and a descriptor per block.
func bufSize(n *config.Node, name, guest string) (packetstream.Config, error) {
	c := packetstream.DefaultConfig()
	a, ok := n.Attr(name)
	if !ok {
		return c, nil
	}
	v, err := n.Number(name, 0)
	if err != nil {
		return c, err
	}
	blocks := v / packetstream.BlockSize
	if guest != "embedded" || blocks < 1 || blocks > packetstream.MaxQueueSize {
		return c, config.Errorf(a.Pos, "%s=%q: an embedded guest's buffer of %d to %d bytes", name, a.Value, packetstream.BlockSize, packetstream.MaxQueueSize*packetstream.BlockSize)
	}
	c.BulkSize = int(blocks) * packetstream.BlockSize
	c.QueueSize = max(packetstream.MinQueueSize, 1<<bits.Len64(blocks-1)) // a power of two, a descriptor per block
	return c, nil
}
