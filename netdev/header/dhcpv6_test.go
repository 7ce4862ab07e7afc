package header

import (
	"slices"
	"testing"
)

// A message built with the builder reads back; truncated options and bad names are refused.
func TestDHCPv6(t *testing.T) {
	b := make([]byte, 64)
	w := StartDHCPv6(b, DHCPv6InfoRequest, 0xabcdef12)
	w.Add(DHCPv6OptClientID, DUIDLL(MAC{2, 0, 0, 0, 0, 1}))
	w.Add(DHCPv6OptElapsedTime, []byte{0, 7})
	m, ok := NewDHCPv6(w.Bytes())
	if !ok || m.Type() != DHCPv6InfoRequest || m.XID() != 0xcdef12 {
		t.Fatalf("%x", w.Bytes())
	}
	if v, ok := m.Option(DHCPv6OptElapsedTime); !ok || v[1] != 7 {
		t.Fatalf("elapsed %x", v)
	}
	if id, _ := m.Option(DHCPv6OptClientID); string(id) != "\x00\x03\x00\x01\x02\x00\x00\x00\x00\x01" {
		t.Fatalf("DUID %x", id)
	}
	if _, ok := m.Option(DHCPv6OptDNSServers); ok {
		t.Fatal("an option that is not there")
	}
	if _, ok := NewDHCPv6(w.Bytes()[:len(w.Bytes())-1]); ok {
		t.Fatal("a truncated option taken")
	}
	names, ok := DomainNames([]byte("\x07example\x03org\x00\x03lab\x00"))
	if !ok || !slices.Equal(names, []string{"example.org", "lab"}) {
		t.Fatalf("names %q", names)
	}
	for _, bad := range []string{"\x07exam", "\x03org", "\x40" + string(make([]byte, 64)) + "\x00"} {
		if _, ok := DomainNames([]byte(bad)); ok {
			t.Fatalf("%q taken", bad)
		}
	}
}
