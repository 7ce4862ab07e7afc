//go:build ignore

// Mainprofile renames the functions of one package in a CPU profile to the names they have
// when that package is a command's main, for `make pgo`:
//
//	go run components/nic_router/mainprofile.go IMPORTPATH IN OUT
//
// PGO matches a profile's functions to the code by name. make pgo profiles nic_router's loop
// with go test, which compiles the command's package main under its import path
// (github.com/nicstack/nicstack/components/nic_router.(*Port).Alloc), while go build names
// the same function main.(*Port).Alloc: without the renaming the shipped binary finds none of
// its own hot calls in the profile (Port's Reserve and Commit went un-inlined).
package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: go run mainprofile.go IMPORTPATH IN OUT")
		os.Exit(2)
	}
	if err := rename(os.Args[1]+".", os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "mainprofile:", err)
		os.Exit(1)
	}
}

// stringTable is the field number of pprof's Profile.string_table, where function names are.
const stringTable = 6

// rename copies the gzipped profile in to out with every string of its string table that
// starts with prefix starting with "main." instead; the other fields are copied unchanged.
func rename(prefix, in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return err
	}
	var res []byte
	renamed := 0
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, data[n:])
		if m < 0 {
			return protowire.ParseError(m)
		}
		field := data[:n+m]
		data = data[n+m:]
		if num == stringTable && typ == protowire.BytesType {
			s, _ := protowire.ConsumeString(field[n:])
			if name, ok := strings.CutPrefix(s, prefix); ok {
				res = protowire.AppendTag(res, stringTable, protowire.BytesType)
				res = protowire.AppendString(res, "main."+name)
				renamed++
				continue
			}
		}
		res = append(res, field...)
	}
	if renamed == 0 {
		return fmt.Errorf("%s names no function of %s", in, strings.TrimSuffix(prefix, "."))
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(res); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}
