package netns

import "net/netip"

// ipv6Ranges are the documentation prefix and unique local addresses: no host routes them out.
var ipv6Ranges = []netip.Prefix{netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("fd00::/8")}

// ScenarioAddr says whether a scenario may put a on an interface of its namespaces: an IPv4
// address of 198.18.0.0/15 or a private range, or an IPv6 one of 2001:db8::/32 or fd00::/8,
// so that its addresses never collide with the host's networks. The supervisor, linux_nic's
// config, the guests' and nicstack-cni check addresses with it.
func ScenarioAddr(a netip.Addr) bool {
	a = a.Unmap()
	if a.Is4() {
		return benchRange.Contains(a) || a.IsPrivate()
	}
	for _, r := range ipv6Ranges {
		if r.Contains(a) {
			return true
		}
	}
	return false
}
