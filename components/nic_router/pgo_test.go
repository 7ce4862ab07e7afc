package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"testing"
)

// default.pgo names the router's loop as the nic_router command has it (main.*), not as go
// test compiles this package (by import path): PGO matches by name, and a profile straight
// from the benchmark leaves the shipped binary's hot calls unoptimised (make pgo renames).
func TestDefaultProfileNamesTheCommand(t *testing.T) {
	f, err := os.Open("default.pgo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("main.(*Loop).round")) {
		t.Error("default.pgo has no main.(*Loop).round: regenerate it with make pgo")
	}
	if bytes.Contains(data, []byte("components/nic_router.(*Loop).round")) {
		t.Error("default.pgo names the loop by import path, which go build does not match: regenerate it with make pgo")
	}
}
