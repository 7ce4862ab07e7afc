package supervisor

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
)

// The supervisor writes for a component only the files its config names, replacing them at
// once or adding at the end, and says once that it refused another path.
func TestWriteFileOnlyWhatTheConfigNames(t *testing.T) {
	dir := t.TempDir()
	named := filepath.Join(dir, "state.xml")
	path := filepath.Join(dir, "scenario.xml")
	os.WriteFile(path, []byte(`<config><start name="r"><binary name="reporter"/><config file="`+named+`"/></start></config>`), 0o644)
	bin := filepath.Join(dir, "reporter")
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	var logs bytes.Buffer
	table := component.Table{{Binary: "reporter", Files: func(cfg any) []string { return []string{cfg.(*config.Node).String("file", "")} }}}
	s, err := New(path, Options{Components: table, BinDirs: []string{dir}, Out: NewOutput(&logs, false), Topology: &Topology{CPUs: [][]int{{0}}}})
	if err != nil {
		t.Fatal(err)
	}
	c := s.newChild(s.sc.Start("r"))
	s.writeFile(c, named, []byte("<st"), false)
	s.writeFile(c, named, []byte("ate/>"), true)
	if b, err := os.ReadFile(named); err != nil || string(b) != "<state/>" {
		t.Errorf("the named file: %q %v", b, err)
	}
	other := filepath.Join(dir, "other")
	s.writeFile(c, other, []byte("x"), false)
	s.writeFile(c, other, []byte("x"), true)
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("a path the config does not name was written: %v", err)
	}
	if n := strings.Count(logs.String(), "asked to write "+other+", which its config does not name; refused"); n != 1 {
		t.Errorf("the refusal is logged %d times, want once:\n%s", n, logs.String())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// The supervisor parses each start's config once, with its component's Spec, and reads the
// files and sockets it names from that typed config however often it asks.
func TestConfigParsedOnceForFilesAndSockets(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "scenario.xml")
	os.WriteFile(path, []byte(`<config><start name="r"><binary name="reporter"/><config file="state.xml"/></start></config>`), 0o644)
	os.WriteFile(filepath.Join(dir, "reporter"), []byte("#!/bin/sh\n"), 0o755)
	type named struct{ file, socket string }
	parses := 0
	table := component.Table{{
		Binary: "reporter",
		Parse: component.Parser(func(n *config.Node, _ string) (named, error) {
			parses++
			return named{filepath.Join(dir, n.String("file", "")), "r.sock"}, nil
		}),
		Files:   func(cfg any) []string { return []string{cfg.(named).file} },
		Sockets: func(cfg any) []string { return []string{cfg.(named).socket} },
	}}
	s, err := New(path, Options{Components: table, BinDirs: []string{dir}, RunDir: dir, Out: NewOutput(io.Discard, false), Topology: &Topology{CPUs: [][]int{{0}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.closeSockets()
	c := s.newChild(s.sc.Start("r"))
	for range 3 {
		s.writeFile(c, filepath.Join(dir, "state.xml"), []byte("<state/>"), false)
	}
	socks, err := s.socketsOf(c.start)
	if err != nil || len(socks) != 1 || socks[0].path != filepath.Join(dir, "r.sock") {
		t.Errorf("sockets %v %v", socks, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "state.xml")); err != nil || string(b) != "<state/>" {
		t.Errorf("the named file: %q %v", b, err)
	}
	if parses != 1 {
		t.Errorf("the config was parsed %d times, want once", parses)
	}
}
