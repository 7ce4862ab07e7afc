package scale

import (
	"testing"
	"time"
)

// The watch notes each guest's first lease line, whatever the writes' boundaries, and ignores
// other starts, other messages and guests outside 1..n.
func TestLeaseWatch(t *testing.T) {
	w := newLeaseWatch("vm", 2)
	for _, s := range []string{
		"[vm1] level=INFO msg=\"link up\" session=1\n[vm2] level=INFO msg=\"link up\" session=1\n",
		"[vm1] level=INFO msg=\"dhcp lease\" address=10.0.1.2\n[vm3] level=INFO msg=\"dhcp lease\" address=10.0.1.4\n",
		"[remote_host] level=INFO msg=\"dhcp lease\" address=x\n[vm2] level=WARN msg=\"dhcp lease lost\" err=x\n",
		"[vm1] level=INFO msg=\"dhcp lease\" address=10.0.1.2\n[vm2] level=INFO msg=\"dhcp ",
	} {
		w.Write([]byte(s))
	}
	if w.count() != 1 {
		t.Fatalf("%d guests with a lease, want 1 (vm1)", w.count())
	}
	first := w.last()
	time.Sleep(time.Millisecond)
	w.Write([]byte("lease\" address=10.0.1.3\n"))
	select {
	case <-w.all:
	default:
		t.Fatal("both guests leased, but the watch did not say so")
	}
	if !w.last().After(first) {
		t.Error("the last lease is vm1's, want vm2's")
	}
	if d := w.dhcpTime(); d <= 0 || d > time.Since(first)+time.Second {
		t.Errorf("DHCP took %v, want vm2's link up to its lease", d)
	}
}
