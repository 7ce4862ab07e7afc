package main

import (
	"net/netip"
	"slices"

	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
)

// Handler is the manager. As Genode's, it writes the router's config at once and again
// whenever the uplink's DNS config (servers and domain name) changed while the uplink has a
// valid address: the short spells without one, while the uplink redoes DHCP, are skipped.
type Handler struct {
	c          *component.Component
	configured bool
	report     *component.Session // the Report session of the router's config, once open
	dnsServers []string
	dnsDomain  string
	outdated   bool // the router's config is to be written
}

// NewHandler returns the manager.
func NewHandler(c *component.Component) *Handler { return &Handler{c: c, outdated: true} }

// Configure asks for the two sessions; the manager's config holds nothing.
func (h *Handler) Configure(any) error {
	if !h.configured {
		h.configured = true
		h.c.Log.Info("Initialized")
		h.c.RequestContent("ROM", "router_state")
		h.c.RequestContent("Report", "router_config")
	}
	return nil
}

func (h *Handler) Open(s *component.Session) error {
	if s.Service == "Report" {
		h.report = s
		h.write()
	}
	return nil
}

// Content reads a new router state.
func (h *Handler) Content(s *component.Session, data []byte, empty bool) {
	if s.Service != "ROM" {
		return
	}
	h.c.Log.Info("Read state of nic_router_2")
	if !empty {
		if state, err := config.Parse("router_state", data); err == nil {
			h.read(state)
		}
	}
	h.write()
}

// read takes the DNS config of the state's first domain "uplink", if its address is valid.
func (h *Handler) read(state *config.Node) {
	for _, d := range state.Subs("domain") {
		if d.Name() != "uplink" {
			continue
		}
		if p, err := netip.ParsePrefix(d.String("ipv4", "")); err != nil || !p.Addr().Is4() || p.Addr().IsUnspecified() {
			return
		}
		var servers []string
		for _, dns := range d.Subs("dns") {
			if a, err := netip.ParseAddr(dns.String("ip", "")); err == nil && a.Is4() && !a.IsUnspecified() {
				servers = append(servers, a.String())
			}
		}
		domain := ""
		if dd := d.Sub("dns-domain"); dd != nil {
			domain = dd.Name()
		}
		if !slices.Equal(servers, h.dnsServers) || domain != h.dnsDomain {
			h.dnsServers, h.dnsDomain, h.outdated = servers, domain, true
		}
		return
	}
}

// write reports the router's config when it is outdated and the Report session is open.
func (h *Handler) write() {
	if !h.outdated || h.report == nil {
		return
	}
	h.c.Log.Info("Write config of nic_router_2")
	h.c.Send(h.report, routerConfig(h.dnsServers, h.dnsDomain).XML())
	h.outdated = false
}

// routerConfig is the config Genode's manager writes: the static config of the unmanaged
// test's nic_router_2, reporting its state on each change of a domain's config, with the
// uplink's DNS config given to the downlink's DHCP server.
func routerConfig(dnsServers []string, dnsDomain string) *config.Node {
	attrs := func(kv ...string) []config.Attr {
		var a []config.Attr
		for i := 0; i < len(kv); i += 2 {
			a = append(a, config.Attr{Name: kv[i], Value: kv[i+1]})
		}
		return a
	}
	dhcp := &config.Node{Type: "dhcp-server", Attrs: attrs("ip_first", "10.0.3.2", "ip_last", "10.0.3.2")}
	for _, s := range dnsServers {
		dhcp.Nodes = append(dhcp.Nodes, &config.Node{Type: "dns-server", Attrs: attrs("ip", s)})
	}
	if dnsDomain != "" {
		dhcp.Nodes = append(dhcp.Nodes, &config.Node{Type: "dns-domain", Attrs: attrs("name", dnsDomain)})
	}
	return &config.Node{Type: "config", Nodes: []*config.Node{
		{Type: "report", Attrs: attrs("bytes", "no", "stats", "no", "quota", "no", "config", "yes", "config_triggers", "yes", "interval_sec", "100")},
		{Type: "policy", Attrs: attrs("label", "test_client -> ", "domain", "downlink")},
		{Type: "nic-client", Attrs: attrs("domain", "uplink")},
		{Type: "domain", Attrs: attrs("name", "uplink")},
		{Type: "domain", Attrs: attrs("name", "downlink", "interface", "10.0.3.1/24"), Nodes: []*config.Node{dhcp}},
	}}
}

func (h *Handler) Close(s *component.Session) {
	if s == h.report {
		h.report = nil
	}
}

func (h *Handler) Stop() {}
