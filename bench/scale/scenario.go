package scale

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/label"
)

// base is the scenario the bench multiplies: its embedded guest that runs an iperf client
// (the template of vm1..vmN) and the guest that runs the far end's iperf server.
type base struct {
	path   string
	data   []byte
	client *iperf.Command // the template's test: its server's address
	prefix string         // the guests' names: the template's start name (vm)
	server string         // the far end's start
}

// loadBase reads the scenario at path and checks that it has what the bench needs.
func loadBase(path string, data []byte) (*base, error) {
	root, err := config.Parse(path, data)
	if err != nil {
		return nil, err
	}
	b := &base{path: path, data: data}
	for _, st := range root.Subs("start") {
		cfg := st.Sub("config")
		if cfg == nil || !embedded(st) {
			continue
		}
		a, ok := cfg.Attr("iperf")
		if !ok {
			continue
		}
		cmd, err := iperf.ParseCommand(strings.Fields(a.Value))
		if err != nil {
			return nil, config.Errorf(a.Pos, "iperf=%q: %v", a.Value, err)
		}
		switch {
		case cmd.Server && b.server != "":
			return nil, config.Errorf(a.Pos, "a second iperf server: the bench wants one far end")
		case cmd.Server:
			b.server = st.Name()
		case b.client != nil:
			return nil, config.Errorf(a.Pos, "a second iperf client: the bench wants one guest to multiply")
		default:
			b.client, b.prefix = cmd, st.Name()
		}
	}
	if b.client == nil || b.server == "" {
		return nil, fmt.Errorf("%s: want one embedded guest with an iperf client (<config iperf=\"-c HOST ...\"/>) and one with the server (iperf=\"-s\")", path)
	}
	return b, nil
}

// embedded says whether st runs an embedded guest: remote_host, or a vm without another guest=.
func embedded(st *config.Node) bool {
	bin := startBinary(st)
	cfg := st.Sub("config")
	return (bin == "vm" || bin == "remote_host") && cfg != nil && cfg.String("guest", "embedded") == "embedded"
}

func startBinary(st *config.Node) string {
	if b := st.Sub("binary"); b != nil {
		return b.Name()
	}
	return st.Name()
}

// firstPort is the port of the far end's first iperf server; guest i (from 1) uses
// firstPort+i-1.
const firstPort = 5201

// scenario is the base with its guest as n guests named PREFIX1..PREFIXn, guest i running one
// TCP stream of the test's time against its own server at the far end (port firstPort+i-1),
// receiving it with rx (iperf -R), all starting at the test's start; the far end runs n servers (iperf_servers). Every guest
// keeps the template's affinity, route and config otherwise, so that the router's policy for
// the template takes each; with domains per-guest the router gets a domain per guest
// (splitDomains); fq on or off puts <fq-codel/> into every domain of the router or takes it out
// (empty: as the base has it). Refused: a DHCP server of the router whose range has fewer addresses than
// the guests it serves.
func (b *base) scenario(n int, t test, domains, fq string) ([]byte, error) {
	root, err := config.Parse(b.path, b.data)
	if err != nil {
		return nil, err
	}
	var kept []*config.Node
	for _, st := range root.Nodes {
		if st.Type != "start" || !embedded(st) || !st.Sub("config").Has("iperf") {
			kept = append(kept, st)
			continue
		}
		cfg := st.Sub("config")
		if st.Name() != b.prefix {
			cfg.Set("iperf", fmt.Sprintf("-s -p %d", firstPort))
			cfg.Set("iperf_servers", strconv.Itoa(n))
			kept = append(kept, st)
			continue
		}
		if st.Sub("binary") == nil { // the start's name was its binary's
			st.Nodes = append(st.Nodes, &config.Node{Type: "binary", Pos: st.Pos, Attrs: []config.Attr{{Name: "name", Value: startBinary(st)}}})
		}
		for i := 1; i <= n; i++ {
			g := st.Clone()
			g.Set("name", b.prefix+strconv.Itoa(i))
			cmd := fmt.Sprintf("-c %s -p %d -t %g", b.client.Client, firstPort+i-1, t.time.Seconds())
			if t.rx {
				cmd += " -R"
			}
			g.Sub("config").Set("iperf", cmd)
			if !t.start.IsZero() {
				g.Sub("config").Set("iperf_start", t.start.UTC().Format(time.RFC3339Nano))
			}
			kept = append(kept, g)
		}
	}
	root.Nodes = kept
	need := n // addresses per DHCP server
	if domains == domainsPerGuest {
		if err := splitDomains(root, b.prefix, n); err != nil {
			return nil, err
		}
		need = 1
	}
	if err := dhcpFits(root, need); err != nil {
		return nil, err
	}
	if fq != "" {
		patched := false
		for _, st := range root.Subs("start") {
			if cfg := st.Sub("config"); startBinary(st) == routerBinary && cfg != nil {
				bench.SetFQCodel(cfg, fq != "off")
				if fq == fqUplink {
					dropGuestFQCodel(cfg, b.prefix, n)
				}
				patched = true
			}
		}
		if !patched {
			return nil, fmt.Errorf("--fq-codel: the scenario has no %s with a <config>", routerBinary)
		}
	}
	return root.XML(), nil
}

// farEndRxBuf sets the far end's rx_buf_size in the scenario text.
func (b *base) farEndRxBuf(text []byte, size string) ([]byte, error) {
	root, err := config.Parse(b.path, text)
	if err != nil {
		return nil, err
	}
	for _, st := range root.Subs("start") {
		if st.Name() == b.server {
			st.Sub("config").Set("rx_buf_size", size)
		}
	}
	return root.XML(), nil
}

// The --far-end-cpu values: the far end's affinity as the base scenario has it (the seed's
// puts it on the guests' CPU), or the router's.
const (
	farEndCPUScenario = "scenario"
	farEndCPURouter   = "router"
)

// farEndWithRouter gives the far end, in the scenario text, the affinity of the router's
// start: the far end stands for another machine, and beside N guests on their CPU it gets
// 1/(N+1) of it, too little to take in what the wire brings, so that its receive buffer's
// drop-tail, not the router, decides the shares. A machine of two CPUs has none to give it
// alone; the router's is the one no guest runs on.
func (b *base) farEndWithRouter(text []byte) ([]byte, error) {
	root, err := config.Parse(b.path, text)
	if err != nil {
		return nil, err
	}
	var aff *config.Node
	for _, st := range root.Subs("start") {
		if startBinary(st) == routerBinary {
			aff = st.Sub("affinity")
		}
	}
	if aff == nil {
		return nil, fmt.Errorf("--far-end-cpu %s: the scenario's %s has no <affinity>", farEndCPURouter, routerBinary)
	}
	for _, st := range root.Subs("start") {
		if st.Name() == b.server {
			st.Remove("affinity")
			st.Nodes = append(st.Nodes, aff.Clone())
		}
	}
	return root.XML(), nil
}

// fqUplink is the --fq-codel value that puts <fq-codel/> into the domains no guest is in
// (the uplink's), as a deployment would: that is where the guests' traffic queues, and a
// queue at each guest's interface (the frames to it) costs a scheduler with a class per
// session for every guest.
const fqUplink = "uplink"

// dropGuestFQCodel takes <fq-codel> out of every domain of the router config cfg that a
// policy for one of the n guests PREFIX1.. names.
func dropGuestFQCodel(cfg *config.Node, prefix string, n int) {
	guests := map[string]bool{}
	for _, p := range cfg.Subs("policy") {
		for i := 1; i <= n; i++ {
			if !label.SelectorOf(p).Conflicts(label.Prefixed(prefix+strconv.Itoa(i), "")) {
				guests[p.String("domain", "")] = true
			}
		}
	}
	for _, d := range cfg.Subs("domain") {
		if guests[d.Name()] {
			d.Remove("fq-codel")
		}
	}
}

// dhcpFits checks that every DHCP server of the scenario's routers leases n addresses.
func dhcpFits(root *config.Node, n int) error {
	var walk func(*config.Node) error
	walk = func(nd *config.Node) error {
		if nd.Type == "dhcp-server" {
			first, _, err := nd.IPv4("ip_first")
			if err != nil {
				return err
			}
			last, _, err := nd.IPv4("ip_last")
			if err != nil {
				return err
			}
			if first.IsValid() && last.IsValid() && size(first, last) < n {
				return config.Errorf(nd.Pos, "dhcp-server %s-%s leases %d addresses, fewer than the %d guests it serves", first, last, size(first, last), n)
			}
		}
		for _, c := range nd.Nodes {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(root)
}

func size(first, last netip.Addr) int {
	f, l := first.As4(), last.As4()
	a := int(f[0])<<24 | int(f[1])<<16 | int(f[2])<<8 | int(f[3])
	z := int(l[0])<<24 | int(l[1])<<16 | int(l[2])<<8 | int(l[3])
	return z - a + 1
}

// guestNumber is i of the guest PREFIXi, 0 for another start.
func guestNumber(name, prefix string) int {
	s, ok := strings.CutPrefix(name, prefix)
	i, err := strconv.Atoi(s)
	if !ok || err != nil || i < 1 || strconv.Itoa(i) != s {
		return 0
	}
	return i
}
