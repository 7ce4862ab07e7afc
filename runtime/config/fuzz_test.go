package config

import (
	"os"
	"path/filepath"
	"testing"
)

func addSeeds(f *testing.F, pattern string, extra ...string) {
	files, _ := filepath.Glob(filepath.Join("testdata", pattern))
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range extra {
		f.Add([]byte(s))
	}
}

// withoutDisabled copies n without its disabled nodes, which XML holds only as comments.
func withoutDisabled(n *Node) *Node {
	c := *n
	c.Nodes = nil
	for _, s := range n.Nodes {
		if !s.Disabled {
			c.Nodes = append(c.Nodes, withoutDisabled(s))
		}
	}
	return &c
}

// checkEmitters asserts that what parsed reads back the same from both emitters.
func checkEmitters(t *testing.T, n *Node) {
	out := n.XML()
	m, err := ParseXML("emitted.xml", out)
	if err != nil {
		t.Fatalf("emitted XML does not parse: %v\n%s", err, out)
	}
	if !m.Equal(withoutDisabled(n)) {
		t.Fatalf("emitted XML reads back differently:\n%s", out)
	}
	if n.CheckHID() != nil {
		return
	}
	out = n.HID()
	m, err = ParseHID("emitted.hid", out)
	if err != nil {
		t.Fatalf("emitted HID does not parse: %v\n%s", err, out)
	}
	if !m.Equal(n) {
		t.Fatalf("emitted HID reads back differently:\n%s", out)
	}
}

func FuzzParseHID(f *testing.F) {
	addSeeds(f, "*.hid", "config\n+ a | x: 1 | + b\n  | : c\nx d\n-\n", "config | a:1|b\n+ c\n : d\n-\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		if n, err := ParseHID("fuzz.hid", data); err == nil {
			if n.CheckHID() != nil {
				t.Fatalf("parsed HID that HID cannot express: %v", n.CheckHID())
			}
			checkEmitters(t, n)
		}
		if n, _, err := ParseWith("fuzz.hid", data, ParseOptions{Lenient: true}); err == nil && DetectSyntax(data) == HID {
			checkEmitters(t, n)
		}
	})
}

func FuzzParseXML(f *testing.F) {
	addSeeds(f, "*.xml", `<a b="&amp;&#10;"><c>&#32;x</c><![CDATA[y]]><!-- z --></a>`, "<a>\n<b x='1'/>\n</a>")
	f.Fuzz(func(t *testing.T, data []byte) {
		if n, err := ParseXML("fuzz.xml", data); err == nil {
			checkEmitters(t, n)
		}
		if n, _, err := ParseWith("fuzz.xml", data, ParseOptions{Lenient: true}); err == nil && DetectSyntax(data) == XML {
			checkEmitters(t, n)
		}
	})
}
