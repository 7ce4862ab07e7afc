package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/runtime/config"
)

// Each scenario in deploy/ given in XML has its HID twin, and the two say the same, node by
// node and attribute by attribute. HID is the form users run (Genode's default); the XML
// copies carry the comments, and tests edit them as XML text. A scenario HID cannot say (a
// label with a trailing blank, as Genode's test-nic_perf_router has) is XML only.
func TestDeployPairsEqual(t *testing.T) {
	xmls, err := filepath.Glob(filepath.Join("..", "..", "deploy", "*.xml"))
	if err != nil || len(xmls) == 0 {
		t.Fatalf("no XML scenarios in deploy/: %v", err)
	}
	for _, x := range xmls {
		xn, err := config.ParseFile(x)
		if err != nil {
			t.Error(err)
			continue
		}
		h := strings.TrimSuffix(x, ".xml") + ".hid"
		if _, err := os.Stat(h); err != nil {
			if xn.CheckHID() == nil {
				t.Errorf("%s has no HID twin: make one with nicstack config convert %s", x, x)
			}
			continue
		}
		hn, err := config.ParseFile(h)
		if err != nil {
			t.Error(err)
			continue
		}
		if d := xn.Diff(hn); d != "" {
			t.Errorf("%s and %s differ: %s", filepath.Base(x), filepath.Base(h), d)
		}
	}
}
