package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindSocket(t *testing.T) {
	tmp := t.TempDir()
	rootInstanceBase = filepath.Join(tmp, "nicstack")
	defer func() { rootInstanceBase = "/run/nicstack" }()
	t.Setenv("XDG_RUNTIME_DIR", tmp)
	t.Setenv("TMPDIR", tmp)
	if got, err := FindSocket("/x.sock", "n"); got != "/x.sock" || err != nil {
		t.Errorf("a path wins: %q %v", got, err)
	}
	if got, err := FindSocket("", ""); got != DefaultSocket() || err != nil {
		t.Errorf("nothing up: the default (its error names it): %q %v", got, err)
	}
	mk := func(name string) string {
		p, err := InstanceSocket(name)
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(p), 0o700)
		os.WriteFile(p, nil, 0o600)
		return p
	}
	a := mk("a")
	if got, err := FindSocket("", ""); got != a || err != nil {
		t.Errorf("one named run: %q %v", got, err)
	}
	mk("b")
	if _, err := FindSocket("", ""); err == nil || !strings.Contains(err.Error(), "(a, b): say which with -s NAME") {
		t.Errorf("two named runs: %v", err)
	}
	for _, bad := range []string{"..", "a/b", "", strings.Repeat("x", 65)} {
		if _, err := InstanceSocket(bad); err == nil && bad != "" {
			t.Errorf("InstanceSocket(%q) accepted", bad)
		}
	}
}
