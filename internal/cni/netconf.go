package cni

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nicstack/nicstack/runtime/netns"
)

// NetConf is nicstack-cni's network configuration: CNI's own fields, the run the pods attach
// to, and the attachment's label, guest and router, as `nicstack attach` takes them.
//
//	{"cniVersion": "1.1.0", "name": "nicstack", "type": "nicstack-cni",
//	 "run": "node", "label": "pod",
//	 "ipam": {"type": "static", "addresses": [{"address": "10.0.2.10/24", "gateway": "10.0.2.1"}],
//	          "routes": [{"dst": "0.0.0.0/0"}], "dns": {"nameservers": ["10.0.2.1"]}}}
type NetConf struct {
	types.NetConf
	// Run is the nicstack run (`nicstack run --name`) the pods attach to; "": the one there
	// is, as `nicstack status` without -s finds it.
	Run string `json:"run,omitempty"`
	// Label is what the router's policies select the pods' domain by; default the network's
	// name.
	Label string `json:"label,omitempty"`
	// Guest is the attachment's guest: netns (the default), a TAP in the pod's namespace, or
	// vhost-user, a socket a VM runtime's VMM connects to (the result's socketPath).
	Guest string `json:"guest,omitempty"`
	// Router is the child that serves the pods' Nic sessions; "": the one that provides Nic.
	Router string `json:"router,omitempty"`
	// IPAM is read by this plugin itself: type dhcp (or none) for a lease from the router's
	// DHCP server, which the supervisor takes on the pod's behalf, or CNI's static IPAM
	// plugin's config, an address the supervisor puts on the interface it makes.
	IPAM IPAM `json:"ipam"`
}

// IPAM is type dhcp, or the static IPAM config (github.com/containernetworking/plugins'
// static plugin).
type IPAM struct {
	Type      string         `json:"type"`
	Addresses []IPAMAddress  `json:"addresses,omitempty"`
	Routes    []*types.Route `json:"routes,omitempty"`
	DNS       types.DNS      `json:"dns"`
}

// IPAMAddress is one address of the static IPAM config.
type IPAMAddress struct {
	Address string `json:"address"`
	Gateway string `json:"gateway,omitempty"`
}

// ipv4Default is the only route the supervisor sets: the default one via the gateway.
var ipv4Default = netip.MustParsePrefix("0.0.0.0/0")

// Static is what the attachment gets from the static IPAM config: its address and its
// gateway (the default route, when valid).
type Static struct {
	Address netip.Prefix
	Gateway netip.Addr
}

// ParseNetConf reads stdin's network configuration. Its errors are CNI errors: 6 for JSON
// that does not decode, 2 for what this slice does not do yet, 7 for a config that is wrong.
func ParseNetConf(stdin []byte) (*NetConf, error) {
	var c NetConf
	if err := json.Unmarshal(stdin, &c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "decoding the network config", err.Error())
	}
	if c.Guest == "" {
		c.Guest = "netns"
	}
	if c.Label == "" {
		c.Label = c.Name
	}
	switch {
	case c.Guest == "vhost-user":
		if c.IPAM.Type != "" || len(c.IPAM.Addresses) > 0 {
			return nil, invalid("guest vhost-user: the VM takes its address from nic_router's DHCP server itself; leave ipam out")
		}
		return &c, nil
	case c.Guest != "netns":
		return nil, invalid(fmt.Sprintf("guest %q: a pod's guest is netns (a TAP in its namespace) or vhost-user (a VM's socket)", c.Guest))
	case c.IPAM.Type == "":
		c.IPAM.Type = "dhcp"
	case c.IPAM.Type != "static" && c.IPAM.Type != "dhcp":
		return nil, invalid(fmt.Sprintf("ipam type %q: want dhcp or static", c.IPAM.Type))
	}
	if c.IPAM.Type == "dhcp" && len(c.IPAM.Addresses) > 0 {
		return nil, invalid("ipam type dhcp: the address comes from the lease; addresses are for type static")
	}
	return &c, nil
}

// Leased says whether the pod's address is a lease from the router's DHCP server: ipam type
// dhcp (or none), unless CNI_ARGS give the pod a static address (IP=, GATEWAY=), which wins
// as over a static config.
func (c *NetConf) Leased(cniArgs string) (bool, error) {
	ip, _, err := argsAddress(cniArgs)
	if err != nil || c.IPAM.Type != "dhcp" || ip != "" {
		return false, err
	}
	for _, r := range c.IPAM.Routes {
		dst, ok := netip.AddrFromSlice(r.Dst.IP)
		bits, _ := r.Dst.Mask.Size()
		if !ok || netip.PrefixFrom(dst.Unmap(), bits) != ipv4Default || r.GW != nil {
			return false, unsupported(fmt.Sprintf("ipam route %s: only the default route via the lease's router so far", r))
		}
	}
	return true, nil
}

// Static is the pod's address from the static IPAM config, or from the runtime's CNI_ARGS
// (IP= and GATEWAY=, which win, as for the static IPAM plugin): a conflist is the same for
// every pod, CNI_ARGS is not.
func (c *NetConf) Static(cniArgs string) (Static, error) {
	var st Static
	addrs := c.IPAM.Addresses
	ip, gw, err := argsAddress(cniArgs)
	if err != nil {
		return st, err
	}
	if ip != "" {
		addrs = []IPAMAddress{{Address: ip, Gateway: gw}}
	}
	switch len(addrs) {
	case 0:
		return st, invalid("ipam: no address: give one in addresses or CNI_ARGS IP=")
	case 1:
	default:
		return st, unsupported("ipam: one address per pod so far")
	}
	p, err := netip.ParsePrefix(addrs[0].Address)
	switch {
	case err != nil:
		return st, invalid(fmt.Sprintf("ipam address %q: want a CIDR", addrs[0].Address))
	case !p.Addr().Is4():
		return st, unsupported(fmt.Sprintf("ipam address %s: IPv4 only so far", p))
	case !netns.ScenarioAddr(p.Addr()): // as the supervisor checks it, refused before anything is made
		return st, invalid(fmt.Sprintf("ipam address %s: want one in 198.18.0.0/15 or a private range", p))
	}
	st.Address = p
	if g := addrs[0].Gateway; g != "" {
		if st.Gateway, err = netip.ParseAddr(g); err != nil || !st.Gateway.Is4() || !p.Masked().Contains(st.Gateway) {
			return st, invalid(fmt.Sprintf("ipam gateway %q: want an IPv4 address in %s", g, p.Masked()))
		}
	}
	for _, r := range c.IPAM.Routes {
		dst, ok := netip.AddrFromSlice(r.Dst.IP)
		bits, _ := r.Dst.Mask.Size()
		if !ok || netip.PrefixFrom(dst.Unmap(), bits) != ipv4Default || (r.GW != nil && r.GW.String() != st.Gateway.String()) {
			return st, unsupported(fmt.Sprintf("ipam route %s: only the default route via the gateway so far", r))
		}
		if !st.Gateway.IsValid() {
			return st, invalid("ipam: a default route needs the address's gateway")
		}
	}
	return st, nil
}

// argsAddress reads IP= and GATEWAY= from CNI_ARGS ("K=V;K=V"), leaving the runtime's other
// keys (K8S_POD_NAME, IgnoreUnknown) alone.
func argsAddress(args string) (ip, gw string, err error) {
	if args == "" {
		return "", "", nil
	}
	for kv := range strings.SplitSeq(args, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return "", "", types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_ARGS %q: want KEY=VALUE pairs separated by ;", args), "")
		}
		switch k {
		case "IP":
			ip = v
		case "GATEWAY":
			gw = v
		}
	}
	if gw != "" && ip == "" {
		return "", "", types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_ARGS: GATEWAY= without IP=", "")
	}
	return ip, gw, nil
}

func invalid(msg string) error { return types.NewError(types.ErrInvalidNetworkConfig, msg, "") }

func unsupported(msg string) error { return types.NewError(types.ErrUnsupportedField, msg, "") }
