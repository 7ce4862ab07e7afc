package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustParse(t *testing.T, file string, data []byte) *Node {
	t.Helper()
	n, err := Parse(file, data)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return n
}

// roundTrip checks that n reads back the same from both emitters.
func roundTrip(t *testing.T, n *Node) {
	t.Helper()
	for _, out := range [][]byte{n.XML(), n.HID()} {
		m, err := Parse("emitted", out)
		if err != nil {
			t.Fatalf("emitted config does not parse: %v\n%s", err, out)
		}
		if !m.Equal(n) {
			t.Fatalf("emitted config reads back differently:\n%s", out)
		}
	}
}

func TestGoldenPairs(t *testing.T) {
	for _, name := range []string{"init", "nic_router"} {
		t.Run(name, func(t *testing.T) {
			xmlFile := filepath.Join("testdata", name+".xml")
			hidFile := filepath.Join("testdata", name+".hid")
			x, err := ParseFile(xmlFile)
			if err != nil {
				t.Fatal(err)
			}
			h, err := ParseFile(hidFile)
			if err != nil {
				t.Fatal(err)
			}
			if !x.Equal(h) {
				t.Fatalf("XML and HID trees differ:\n%s\n%s", x.HID(), h.HID())
			}
			roundTrip(t, x)
			if err := x.CheckHID(); err != nil {
				t.Fatal(err)
			}
			// The emitted forms are goldens too: a change in layout shows in review.
			for _, g := range []struct {
				file string
				out  []byte
			}{{name + ".out.hid", x.HID()}, {name + ".out.xml", x.XML()}} {
				path := filepath.Join("testdata", g.file)
				if os.Getenv("UPDATE_GOLDEN") != "" {
					if err := os.WriteFile(path, g.out, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create)", err)
				}
				if !bytes.Equal(want, g.out) {
					t.Errorf("%s differs from emitted output:\n%s", path, g.out)
				}
			}
		})
	}
}

func TestGoldenContents(t *testing.T) {
	n, err := ParseFile("testdata/init.hid")
	if err != nil {
		t.Fatal(err)
	}
	if got := n.String("verbose", ""); got != "yes" {
		t.Errorf("verbose = %q", got)
	}
	starts := n.Subs("start")
	if len(starts) != 3 || starts[1].Name() != "nic_router" {
		t.Fatalf("starts: %d", len(starts))
	}
	ram, err := starts[1].Number("ram", 0)
	if err != nil || ram != 10<<20 {
		t.Errorf("ram = %d, %v", ram, err)
	}
	if a, _ := starts[1].Attr("ram"); a.Pos.String() != "testdata/init.hid:35:3" {
		t.Errorf("ram at %s", a.Pos)
	}
	dom := starts[1].Sub("config").Subs("domain")[1]
	if dom.Name() != "default" || dom.Pos.String() != "testdata/init.hid:46:7" {
		t.Errorf("domain %q at %s", dom.Name(), dom.Pos)
	}
	arg := starts[2].Sub("config").Sub("arg")
	if arg.Content != "iperf3 -c 198.18.0.1 -R -t 60 | tee /tmp/log" {
		t.Errorf("arg content %q", arg.Content)
	}
	nic := starts[2].Sub("route").Sub("service").Sub("child")
	if nic.Name() != "nic_router" || nic.String("label", "") != "vm" {
		t.Errorf("route target %+v", nic.Attrs)
	}

	x, err := ParseFile("testdata/init.xml")
	if err != nil {
		t.Fatal(err)
	}
	xs := x.Subs("start")[1]
	if xs.Pos.String() != "testdata/init.xml:35:3" {
		t.Errorf("XML start at %s", xs.Pos)
	}
	if a, _ := xs.Attr("ram"); a.Pos.String() != "testdata/init.xml:35:38" {
		t.Errorf("XML ram at %s", a.Pos)
	}
}

func TestHIDReading(t *testing.T) {
	for _, c := range []struct{ name, hid, xml string }{
		{"top attrs on own lines", "config\n        verbose: yes\n        arch:    x86_64\n-\n",
			`<config verbose="yes" arch="x86_64"/>`},
		{"compacted", "config | verbose: yes | arch: x86_64\n-", `<config verbose="yes" arch="x86_64"/>`},
		{"name shorthand", "config\n+ start osci\n  ram: 8M\n-\n", `<config><start name="osci" ram="8M"/></config>`},
		{"attribute on type line", "launcher pkg: a/b/c | priority: 0\n-\n", `<launcher pkg="a/b/c" priority="0"/>`},
		{"tabular nesting", "route\n+ service ROM | label: recording | + child record_rom\n+ service Gui                    | + child wm\n-\n",
			`<route><service name="ROM" label="recording"><child name="record_rom"/></service><service name="Gui"><child name="wm"/></service></route>`},
		{"visual scope", "config\n+ a\n  | x: 1\n  | + b | y: 2\n  + c\n+ d\n-\n", `<config><a x="1"><b y="2"/><c/></a><d/></config>`},
		{"comments", "config\n. about config\n+ a | . trailing | comment\n  . x: 1\n-\n", `<config><a/></config>`},
		{"content", "config\n+ arg -c\n  : while true; do\n  :  read -p '> ' | x\n  :\n  : done\n-\n",
			"<config><arg name=\"-c\">while true; do\n read -p '&gt; ' | x\n\ndone</arg></config>"},
		{"content compact", "config\n+ env TERM | : screen\n-\n", `<config><env name="TERM">screen</env></config>`},
		{"tab in content and comment", "config\n. a\tb\n+ a\n  : x\ty\n-\n", "<config><a>x\ty</a></config>"},
		{"CRLF", "config\r\n+ a | x: 1\r\n-\r\n", `<config><a x="1"/></config>`},
		{"empty value", "config | x: | y: 2\n-\n", `<config x="" y="2"/>`},
		{"colon in name", "config\n+ dev a:b\n+ dev :\n-\n", `<config><dev name="a:b"/><dev name=":"/></config>`},
		{"value with colon", "config | url: http://x:80/\n-\n", `<config url="http://x:80/"/>`},
		{"name with spaces", "config\n+ start my app\n-\n", `<config><start name="my app"/></config>`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := mustParse(t, "a.hid", []byte(c.hid))
			x := mustParse(t, "a.xml", []byte(c.xml))
			if !h.Equal(x) {
				t.Fatalf("HID reads as\n%s\nwant\n%s", h.XML(), x.XML())
			}
			roundTrip(t, h)
		})
	}
}

func TestDisabled(t *testing.T) {
	src := "config\n+ start black_hole\nx start system_shell | ram: 1G\n  + route | + any-service | + parent\n+ start b\n-\n"
	n := mustParse(t, "d.hid", []byte(src))
	if len(n.Nodes) != 3 || !n.Nodes[1].Disabled || len(n.Children()) != 2 || len(n.Subs("start")) != 2 {
		t.Fatalf("disabled node: %d nodes", len(n.Nodes))
	}
	if n.Subs("start")[1].Name() != "b" {
		t.Fatal("disabled node not skipped")
	}
	if !n.Nodes[1].Sub("route").Sub("any-service").Sub("parent").Equal(&Node{Type: "parent"}) {
		t.Fatal("sub-tree of disabled node lost")
	}
	h := n.HID()
	if !bytes.Contains(h, []byte("x start system_shell | ram: 1G\n")) {
		t.Fatalf("disabled node not re-emitted:\n%s", h)
	}
	roundTrip(t, &Node{Type: "config", Nodes: []*Node{{Type: "a"}}}) // XML cannot hold x nodes
	x := mustParse(t, "d.xml", n.XML())
	if len(x.Nodes) != 2 || !bytes.Contains(n.XML(), []byte(`<!-- <start name="system_shell" ram="1G">`)) {
		t.Fatalf("disabled node in XML:\n%s", n.XML())
	}
}

func TestXMLReading(t *testing.T) {
	src := "<?xml version=\"1.0\"?>\n<!-- c -- d --->\n<config a='1' b = \"x &amp; &lt;y&gt; &#65;&#x42;\">\n\t<!-- inside -->\n\t<x><![CDATA[<raw>]]></x>\n\t<y>&#32;</y>\n</config>\n<!-- after -->\n"
	n := mustParse(t, "a.xml", []byte(src))
	if n.String("a", "") != "1" || n.String("b", "") != "x & <y> AB" {
		t.Fatalf("attrs %+v", n.Attrs)
	}
	if n.Sub("x").Content != "<raw>" || n.Sub("y").Content != " " {
		t.Fatalf("content %q %q", n.Sub("x").Content, n.Sub("y").Content)
	}
	if a, _ := n.Attr("b"); a.Pos.String() != "a.xml:3:15" {
		t.Fatalf("b at %s", a.Pos)
	}
	roundTrip(t, &Node{Type: "config", Nodes: []*Node{{Type: "y", Content: " "}}})
}

// firstErr returns the first error of a failed parse, or fails the test.
func firstErr(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want a positioned error, got %v", err)
	}
	return e
}

func TestErrors(t *testing.T) {
	for _, c := range []struct{ name, src, pos, msg string }{
		{"missing end marker", "config\n+ a\n", "3:1", "missing the end marker"},
		{"end marker not alone", "config\n-x\n", "2:2", "must stand alone"},
		{"text after end", "config\n-\nmore\n", "3:1", "after the end marker"},
		{"bad indentation of sub-node", "config\n+ a\n + b\n-\n", "3:2", "bad indentation"},
		{"attribute indented less than its node", "config\n+ start a\n  + binary x\n  ram: 8M\n-\n", "4:3", "bad indentation: attribute \"ram\" belongs to <binary>"},
		{"content indented less", "config\n+ a\n  + b\n  : x\n-\n", "4:3", "content of <b>"},
		{"content and sub-nodes", "config\n+ a\n  : x\n  + b\n-\n", "4:5", "has content"},
		{"attribute after content", "config\n+ a\n  : x\n  y: 1\n-\n", "4:3", "after the content"},
		{"duplicate attribute", "config | a: 1\n  a: 2\n-\n", "2:3", "duplicate attribute \"a\" of <config> (first at 1:10)"},
		{"duplicate name", "config\n+ start a | name: b\n-\n", "2:13", "duplicate attribute \"name\""},
		{"pipe in value", "config | label: a|b\n-\n", "1:18", "'|' must be enclosed in spaces"},
		{"pipe splits value", "config | label: a | b\n-\n", "1:21", "expected 'tag: value'"},
		{"no space after colon", "config | a:1\n-\n", "1:12", "expected a space"},
		{"no space after type", "config:\n-\n", "1:7", "expected a space or ' | ' after the node type"},
		{"bad node type", "config\n+ Start\n-\n", "2:3", "expected a node type"},
		{"plus alone", "config\n+\n-\n", "2:1", "expected a node type"},
		{"comment above top", ". hello\nconfig\n-\n", "1:1", "comment above"},
		{"no top-level node", "  + a\n-\n", "1:3", "expected the top-level node type"},
		{"empty", "", "1:1", "empty config"},
		{"tab as indentation", "config\n\t+ a\n-\n", "2:1", "tab character"},
		{"tab as separator", "config\ttest: 1\n-\n", "1:7", "tab character"},
		{"control character", "config | a: x\x01\n-\n", "1:14", "control character"},
		{"CR inside line", "config\n  a:\r 5\n-\n", "2:5", "control character"},
		{"non-UTF-8 HID", "config | a: \xff\xfe\n-\n", "1:13", "not valid UTF-8"},
		{"non-UTF-8 XML", "<config a=\"\xc3\x28\"/>", "1:12", "not valid UTF-8"},
		{"unterminated XML", "<config>\n\t<a>\n", "3:1", "unterminated element <a> opened at 2:2"},
		{"unterminated tag", "<config\n", "2:1", "unterminated tag <config>"},
		{"unterminated comment", "<config><!-- x", "1:9", "unterminated comment"},
		{"mismatched end tag", "<config><a></b></config>", "1:12", "</b> does not close <a> opened at 1:9"},
		{"XML duplicate attribute", "<config a=\"1\" a=\"2\"/>", "1:15", "duplicate attribute \"a\""},
		{"XML unquoted value", "<config a=1/>", "1:11", "expected the quoted value"},
		{"XML unknown entity", "<config a=\"&foo;\"/>", "1:12", "unknown entity"},
		{"XML bare ampersand", "<config>a & b</config>", "1:11", "'&' must start an entity"},
		{"XML mixed content", "<config>text<a/></config>", "1:9", "both text and sub-nodes"},
		{"XML text after root", "<config/>\n<other/>", "2:1", "text after the root element"},
		{"XML DOCTYPE", "<!DOCTYPE x><config/>", "1:1", "DOCTYPE"},
		{"XML no space between attributes", "<config a=\"1\"b=\"2\"/>", "1:14", "expected a space"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("f", []byte(c.src))
			if err == nil {
				t.Fatal("no error")
			}
			e := firstErr(t, err)
			if got := e.Pos.String(); got != "f:"+c.pos || !strings.Contains(e.Msg, c.msg) {
				t.Fatalf("got %v\nwant f:%s: ...%s...", e, c.pos, c.msg)
			}
		})
	}
}

func TestManyErrorsReported(t *testing.T) {
	_, err := Parse("f", []byte("config\n+ a | b\n+ c | d\n-\n"))
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("want 2 errors, got %v", err)
	}
	if list.Error() != "f:2:7: expected 'tag: value', '+ node', 'x node', '. comment' or ': content', found \"b\"\n"+
		"f:3:7: expected 'tag: value', '+ node', 'x node', '. comment' or ': content', found \"d\"" {
		t.Fatalf("%s", list)
	}
}

func TestLenient(t *testing.T) {
	for _, c := range []struct {
		name, src, want string
		warnings        int
	}{
		{"duplicate: first wins", "config | a: 1 | a: 2\n-\n", `<config a="1"/>`, 1},
		{"broken line skipped", "config\n+ a | x: 1 | b\n+ c\n-\n", `<config><a x="1"/><c/></config>`, 1},
		{"missing spaces accepted", "config | a:1|b: 2\n-\n", `<config a="1" b="2"/>`, 0},
		{"Genode's indentation", "config\n+ start a\n  + binary x\n  ram: 8M\n-\n", `<config><start name="a"><binary name="x" ram="8M"/></start></config>`, 0},
		{"content beside sub-nodes dropped", "config\n+ a\n  : x\n  + b\n-\n", `<config><a><b/></a></config>`, 1},
		{"broken node swallowed", "config\n+ 1a\n  + b\n+ c\n-\n", `<config><c/></config>`, 1},
		{"trailing text ignored", "config\n-\nmore\x00\xff", `<config/>`, 1},
		{"XML duplicate", `<config a="1" a="2"/>`, `<config a="1"/>`, 1},
		{"XML mixed content", `<config>x<a/></config>`, `<config><a/></config>`, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, warns, err := ParseWith("f", []byte(c.src), ParseOptions{Lenient: true})
			if err != nil {
				t.Fatal(err)
			}
			if !n.Equal(mustParse(t, "w", []byte(c.want))) || len(warns) != c.warnings {
				t.Fatalf("got\n%s%d warnings %v", n.XML(), len(warns), warns)
			}
			if _, err := Parse("f", []byte(c.src)); err == nil && c.warnings > 0 {
				t.Fatal("strict parse accepted what lenient warned about")
			}
		})
	}
	// Genode rejects these as a whole at run time too.
	for _, src := range []string{"config\n+ a\n", "config | a: \x02\n-\n", "<config>"} {
		if _, _, err := ParseWith("f", []byte(src), ParseOptions{Lenient: true}); err == nil {
			t.Errorf("lenient parse accepted %q", src)
		}
	}
}

func TestDeepNesting(t *testing.T) {
	var x strings.Builder
	x.WriteString("<config>")
	for i := 0; i < 100000; i++ {
		x.WriteString("<a>")
	}
	for _, src := range []string{x.String(), deepHID(MaxDepth + 10)} {
		_, err := Parse("deep", []byte(src))
		if e := firstErr(t, err); !strings.Contains(e.Msg, "nest deeper than") {
			t.Fatalf("got %v", e)
		}
	}
	if _, err := Parse("deep", []byte(deepHID(MaxDepth-1))); err != nil {
		t.Fatalf("depth %d: %v", MaxDepth-1, err)
	}
}

// deepHID nests n sub-nodes below the top-level node.
func deepHID(n int) string {
	var b strings.Builder
	b.WriteString("config\n")
	for i := 0; i < n; i++ {
		b.WriteString(strings.Repeat(" ", 2*i) + "+ a\n")
	}
	b.WriteString("-\n")
	return b.String()
}

func TestLargeInput(t *testing.T) {
	size := 10 << 20
	if raceEnabled {
		size = 1 << 20
	}
	big := bigConfig(size)
	h, err := Parse("big.hid", big)
	if err != nil {
		t.Fatal(err)
	}
	x, err := Parse("big.xml", h.XML())
	if err != nil {
		t.Fatal(err)
	}
	if !x.Equal(h) {
		t.Fatal("large config differs between syntaxes")
	}
	tooBig := make([]byte, MaxSize+1)
	if _, err := Parse("huge", tooBig); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("got %v", err)
	}
}

// bigConfig makes a nic_router-like HID config of about size bytes.
func bigConfig(size int) []byte {
	var b bytes.Buffer
	b.WriteString("config | verbose_domain_state: yes\n")
	for i := 0; b.Len() < size; i++ {
		b.WriteString("+ domain d")
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString(" | interface: 10.0.1.1/24 | gateway: 10.0.1.254\n")
		b.WriteString("  + nat | domain: uplink | tcp-ports: 1000 | udp-ports: 1000\n")
		b.WriteString("  + dhcp-server | ip_first: 10.0.1.2 | ip_last: 10.0.1.200\n")
		b.WriteString("  + tcp | dst: 0.0.0.0/0 | + permit | port: 80 | domain: uplink\n")
		b.WriteString("  + tcp-forward | port: 8080 | domain: default | to: 10.0.1.3\n")
	}
	b.WriteString("-\n")
	return b.Bytes()
}

func TestCheckHID(t *testing.T) {
	n := mustParse(t, "a.xml", []byte(`<config Name="a" v=" x" p="a|b" c="x&#10;y"><In/><a>t&#13;</a></config>`))
	err := n.CheckHID()
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 6 {
		t.Fatalf("got %v", err)
	}
	if list[0].Pos.String() != "a.xml:1:9" || !strings.Contains(list[0].Msg, `"Name"`) {
		t.Fatalf("got %v", list[0])
	}
}

func TestDetectSyntax(t *testing.T) {
	if DetectSyntax([]byte(" \n\t<config/>")) != XML || DetectSyntax([]byte("\nconfig\n-")) != HID || DetectSyntax(nil) != HID ||
		DetectSyntax([]byte("\ufeff<config/>")) != XML {
		t.Fatal("detect")
	}
	// Leading blank lines are allowed before either syntax.
	mustParse(t, "a", []byte("\n\n  \nconfig\n-\n"))
}

// The layouts doc/hid.txt shows must read strictly.
func TestHIDDocLayouts(t *testing.T) {
	src := "launcher pkg: someone/pkg/mixer/2025-01-01 | priority: 0\r\n" +
		"+ config jitter_ms: 10 | warning_rate_ms: 0\n" +
		"  .\n" +
		"  . wildcard rules\t(tab in a comment)\n" +
		"  .\n" +
		"  + mix left\n" +
		"  | + play label_suffix: -> left  | volume: 0.5\n" +
		"  x mix mic\n" +
		"  | + play label: audio -> mic\n" +
		"  x policy label: vm -> left | record: mic\n" +
		"  |                            period_ms: 46\n" +
		"  + policy label: audio -> right | record: right\n" +
		"                                   period_ms: 12\n" +
		"    : free-form | content\n" +
		"    :  with\ttab\n" +
		"+ start osci | ram: 8M\n" +
		"  + config\n" +
		"  |        fps:        50\n" +
		"  |        phase_lock: no    | . use 'yes' for more stability\n" +
		"  |        background: #1a2831\n" +
		"  |\n" +
		"  | + channel | label: mic_left  | color: #ff6633\n" +
		"  + route\n" +
		"    + service ROM | label: recording | + child record_rom\n" +
		"    + service Gui                    | + child wm\n" +
		"    + any-service                    | + parent\n" +
		"+ route | + service Report | + parent\n" +
		"-"
	n := mustParse(t, "doc.hid", []byte(src))
	cfg := n.Sub("config")
	if cfg.String("warning_rate_ms", "") != "0" || len(cfg.Nodes) != 4 || len(cfg.Children()) != 2 {
		t.Fatalf("config: %s", cfg.XML())
	}
	pol := cfg.Sub("policy")
	if pol.String("label", "") != "audio -> right" || pol.String("period_ms", "") != "12" ||
		pol.Content != "free-form | content\n with\ttab" {
		t.Fatalf("policy: %q %+v", pol.Content, pol.Attrs)
	}
	osci := n.Sub("start").Sub("config")
	if osci.String("phase_lock", "") != "no" || osci.String("background", "") != "#1a2831" ||
		osci.Sub("channel").String("color", "") != "#ff6633" {
		t.Fatalf("osci: %s", osci.XML())
	}
	if len(n.Sub("start").Sub("route").Subs("service")) != 2 || n.Subs("route")[0].Sub("service").Sub("parent") == nil {
		t.Fatalf("routes: %s", n.XML())
	}
	roundTrip(t, withoutDisabled(n))
}
