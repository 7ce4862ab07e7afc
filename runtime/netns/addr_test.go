package netns

import (
	"net/netip"
	"testing"
)

func TestScenarioAddr(t *testing.T) {
	for a, want := range map[string]bool{
		"198.18.0.2": true, "198.19.255.1": true, "10.0.1.2": true, "192.168.1.1": true, "172.16.0.1": true,
		"::ffff:10.0.1.2": true, "2001:db8:ffff::2": true, "fd00:1::2": true,
		"198.20.0.1": false, "8.8.8.8": false, "127.0.0.1": false, "2001:4860::1": false, "fe80::1": false, "::1": false,
	} {
		if got := ScenarioAddr(netip.MustParseAddr(a)); got != want {
			t.Errorf("ScenarioAddr(%s) = %v, want %v", a, got, want)
		}
	}
}
