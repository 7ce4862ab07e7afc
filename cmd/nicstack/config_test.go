package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/runtime/config"
)

// runConfig runs "nicstack config ARGS..." in-process and returns stdout, stderr and the error.
func runConfig(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"config"}, args...))
	defer root.SetArgs(nil)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

func TestConfigConvert(t *testing.T) {
	for _, name := range []string{"init", "nic_router"} {
		hidFile := filepath.Join("..", "..", "runtime", "config", "testdata", name+".hid")
		out, _, err := runConfig(t, "convert", "--to", "xml", hidFile) // flags persist on root between runs
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out, "<config") {
			t.Fatalf("not XML:\n%s", out)
		}
		x, err := config.Parse("out.xml", []byte(out))
		if err != nil {
			t.Fatal(err)
		}
		h, err := config.ParseFile(hidFile)
		if err != nil {
			t.Fatal(err)
		}
		if !x.Equal(h) {
			t.Fatal("conversion changed the tree")
		}
		back, _, err := runConfig(t, "convert", "--to", "hid", hidFile)
		if err != nil || !bytes.Equal([]byte(back), h.HID()) {
			t.Fatalf("--to hid: %v\n%s", err, back)
		}
	}
}

func TestConfigConvertErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.hid")
	if err := os.WriteFile(bad, []byte("config\n+ a\n + b | x: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runConfig(t, "convert", bad)
	if err == nil || out != "" {
		t.Fatalf("err %v, out %q", err, out)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], bad+":3:2: bad indentation") ||
		!strings.HasPrefix(lines[1], bad+":4:1: missing the end marker") {
		t.Fatalf("stderr:\n%s", errOut)
	}

	pipe := filepath.Join(dir, "pipe.xml")
	if err := os.WriteFile(pipe, []byte(`<config>`+"\n"+`  <a label="x | y"/></config>`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := runConfig(t, "convert", "--to", "hid", pipe); err == nil || !strings.HasPrefix(errOut, pipe+":2:6: value of attribute \"label\" holds '|'") {
		t.Fatalf("err %v, stderr %q", err, errOut)
	}
	if _, _, err := runConfig(t, "convert", filepath.Join(dir, "missing.hid")); err == nil {
		t.Fatal("no error for a missing file")
	}
}
