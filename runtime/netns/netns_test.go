package netns

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/nicstack/nicstack/internal/testutil"
)

// forTest is backendtest.Namespace, which this package cannot import.
func forTest(t *testing.T, label string) *NS {
	testutil.RequireRoot(t)
	n, err := New(label)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func TestVethAcrossNamespaces(t *testing.T) {
	a := forTest(t, "a")
	b := forTest(t, "b")
	if err := Veth("va", a, "vb", b); err != nil {
		t.Fatal(err)
	}
	if err := a.AddrAdd("va", "198.18.7.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := b.AddrAdd("vb", "198.18.7.2/24"); err != nil {
		t.Fatal(err)
	}
	// A socket opened inside Do stays in that namespace.
	var ln net.Listener
	if err := b.Do(func() (err error) {
		ln, err = net.Listen("tcp4", "198.18.7.2:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := a.Do(func() error {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func TestAddrOutsideBenchRangeRefused(t *testing.T) {
	a := forTest(t, "r")
	if err := a.AddrAdd("lo", "10.0.0.1/8"); err == nil {
		t.Fatal("10.0.0.1/8 accepted")
	}
	if err := a.AddrAdd("lo", "198.18.0.1/8"); err == nil {
		t.Fatal("a /8 around 198.18.0.1 accepted")
	}
}

func TestCloseDeletesNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	a, err := New("c")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(runDir, a.Name)); !os.IsNotExist(err) {
		t.Fatalf("%s still exists: %v", a.Name, err)
	}
}
