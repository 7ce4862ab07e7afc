package nat

import "testing"

func TestPortsExhaustAndReuse(t *testing.T) {
	var p Ports
	seen := map[uint16]bool{}
	for k := 0; k < Last-First+1; k++ {
		port, ok := p.Alloc()
		if !ok || port < First || seen[port] {
			t.Fatalf("alloc %d: port %d ok %v", k, port, ok)
		}
		seen[port] = true
	}
	if _, ok := p.Alloc(); ok || p.InUse() != Last-First+1 {
		t.Fatal("allocated beyond the dynamic range")
	}
	p.Free(50000)
	if port, ok := p.Alloc(); !ok || port != 50000 {
		t.Fatalf("freed port not found: %d %v", port, ok)
	}
	p.Free(50000)
	if !p.Take(50000) || p.Take(50000) || p.Take(1000) {
		t.Fatal("Take must claim a free dynamic port exactly once")
	}
}

func TestPortsRoundRobin(t *testing.T) {
	var p Ports
	a, _ := p.Alloc()
	p.Free(a)
	if b, _ := p.Alloc(); b == a {
		t.Fatal("a just freed port is reused at once")
	}
}
