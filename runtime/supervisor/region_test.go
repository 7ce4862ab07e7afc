package supervisor

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/runtime/component"
)

// A child's state region is one memfd of its Spec's size, sealed to it: every launch gets a
// descriptor of the same memory, as the one before left it, until discardRegion lets it go.
// A component that asks for none gets none.
func TestStateRegionKeptUntilDiscarded(t *testing.T) {
	s := &Supervisor{opts: Options{Components: component.Table{{Binary: "keeper", State: 8192}, {Binary: "plain"}}}}
	c := &child{start: &Start{Name: "k", Binary: "keeper"}}
	mapped := func() []byte {
		t.Helper()
		f, err := s.stateRegion(c)
		if err != nil || f == nil {
			t.Fatalf("state region: %v", err)
		}
		defer f.Close()
		if err := unix.Ftruncate(int(f.Fd()), 4096); err == nil {
			t.Fatal("a component could shrink its state region")
		}
		mem, err := unix.Mmap(int(f.Fd()), 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Munmap(mem) })
		return mem
	}
	mapped()[100] = 7 // the first process writes, and is killed
	if got := mapped()[100]; got != 7 {
		t.Fatalf("the next process found %d, want what the last one wrote", got)
	}
	c.discardRegion()
	if got := mapped()[100]; got != 0 {
		t.Fatalf("after discardRegion the next process found %d, want a new region", got)
	}
	c.discardRegion()
	if f, err := s.stateRegion(&child{start: &Start{Name: "p", Binary: "plain"}}); f != nil || err != nil {
		t.Fatalf("a component without State got %v, %v", f, err)
	}
}
