package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The XML reader is our own so that every node and attribute gets its line and column, and
// so that the tree follows Genode's reading: attributes in order, the text of a leaf node as
// its content, comments dropped. It loops with an explicit stack, so deep input costs no Go
// stack. Entities (&lt; &gt; &amp; &quot; &apos; &#n; &#xn;) are decoded; DTDs are refused.

type xmlOpen struct {
	n        *Node
	text     strings.Builder
	nonBlank bool
	textOff  int // of the first non-blank text, for the mixed-content error
}

type xmlParser struct {
	file    string
	src     string
	i       int
	lines   []int // offsets where lines start
	lenient bool
	warns   []*Error
}

// xmlError aborts the parse; malformed XML has no run-time reading.
type xmlError struct{ e *Error }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func parseXML(file string, data []byte, opts ParseOptions) (n *Node, warns []*Error, err error) {
	if len(data) > MaxSize {
		return nil, nil, ErrorList{tooLarge(file)}
	}
	p := &xmlParser{file: file, src: string(data), lenient: opts.Lenient}
	p.lines = append(p.lines, 0)
	for i := 0; ; {
		j := strings.IndexByte(p.src[i:], '\n')
		if j < 0 {
			break
		}
		i += j + 1
		p.lines = append(p.lines, i)
	}
	if i, msg := badByte(p.src, func(c byte) bool { return c == '\t' || c == '\n' || c == '\r' }); i >= 0 {
		return nil, nil, ErrorList{Errorf(p.pos(i), "%s", msg)}
	}
	defer func() {
		if r := recover(); r != nil {
			xe, ok := r.(xmlError)
			if !ok {
				panic(r)
			}
			n, err = nil, ErrorList{xe.e}
		}
	}()
	n = p.document()
	return n, p.warns, nil
}

func (p *xmlParser) pos(off int) Pos {
	l := sort.Search(len(p.lines), func(k int) bool { return p.lines[k] > off }) - 1
	return Pos{File: p.file, Line: l + 1, Col: off - p.lines[l] + 1}
}

func (p *xmlParser) fail(off int, format string, args ...any) {
	panic(xmlError{Errorf(p.pos(off), format, args...)})
}

func (p *xmlParser) bad(off int, format string, args ...any) {
	if !p.lenient {
		p.fail(off, format, args...)
	}
	p.warns = append(p.warns, Errorf(p.pos(off), format, args...))
}

func (p *xmlParser) eof() bool              { return p.i >= len(p.src) }
func (p *xmlParser) has(prefix string) bool { return strings.HasPrefix(p.src[p.i:], prefix) }
func (p *xmlParser) skipSpace() {
	for !p.eof() && isSpace(p.src[p.i]) {
		p.i++
	}
}
func (p *xmlParser) skipPast(end, what string) { p.skipTo(end, what); p.i += len(end) }

func (p *xmlParser) skipTo(end, what string) {
	j := strings.Index(p.src[p.i:], end)
	if j < 0 {
		p.fail(p.i, "unterminated %s: expected %q", what, end)
	}
	p.i += j
}

// misc skips blanks, comments and (where allowed) processing instructions.
func (p *xmlParser) misc(prolog bool) {
	for {
		p.skipSpace()
		switch {
		case p.has("<!--"):
			p.comment()
		case prolog && p.has("<?"):
			p.skipPast("?>", "processing instruction")
		case p.has("<!DOCTYPE"):
			p.fail(p.i, "DOCTYPE is not supported in configs")
		default:
			return
		}
	}
}

// comment skips "<!-- ... -->". Like Genode's reader it accepts "--" inside.
func (p *xmlParser) comment() {
	start := p.i
	p.i += 4
	j := strings.Index(p.src[p.i:], "-->")
	if j < 0 {
		p.fail(start, "unterminated comment: expected \"-->\"")
	}
	p.i += j + 3
}

func (p *xmlParser) document() *Node {
	if p.has("\ufeff") {
		p.i += 3
	}
	p.misc(true)
	if p.eof() || p.src[p.i] != '<' {
		p.fail(p.i, "expected the root element '<type ...>'")
	}
	root, closed := p.startTag()
	var stack []*xmlOpen
	if !closed {
		stack = append(stack, &xmlOpen{n: root})
	}
	for len(stack) > 0 {
		top := stack[len(stack)-1]
		p.text(top)
		if p.eof() {
			p.fail(p.i, "unterminated element <%s> opened at %d:%d: expected </%s>", top.n.Type, top.n.Pos.Line, top.n.Pos.Col-1, top.n.Type)
		}
		switch {
		case p.has("<!--"):
			p.comment()
		case p.has("<![CDATA["):
			p.i += 9
			start := p.i
			p.skipTo("]]>", "CDATA section")
			p.addText(top, start, p.src[start:p.i], p.src[start:p.i])
			p.i += 3
		case p.has("</"):
			p.endTag(top)
			stack = stack[:len(stack)-1]
		case p.has("<?") || p.has("<!"):
			p.fail(p.i, "expected an element, a comment or text")
		default:
			n, closed := p.startTag()
			top.n.Nodes = append(top.n.Nodes, n)
			if !closed {
				if len(stack) >= MaxDepth {
					p.fail(p.i, "nodes nest deeper than %d levels", MaxDepth)
				}
				stack = append(stack, &xmlOpen{n: n})
			}
		}
	}
	p.misc(false)
	if !p.eof() {
		p.bad(p.i, "text after the root element </%s>", root.Type)
	}
	return root
}

// name reads an XML name at the current position.
func (p *xmlParser) name(what string) string {
	start := p.i
	for !p.eof() {
		c := p.src[p.i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':' ||
			p.i > start && (c >= '0' && c <= '9' || c == '-' || c == '.') {
			p.i++
			continue
		}
		break
	}
	if p.i == start {
		p.fail(start, "expected %s", what)
	}
	return p.src[start:p.i]
}

// startTag reads "<type attr="value" ...>" or "/>"; closed reports the latter.
func (p *xmlParser) startTag() (n *Node, closed bool) {
	p.i++ // '<'
	n = &Node{Pos: p.pos(p.i)}
	n.Type = p.name("a node type after '<'")
	for {
		sp := p.i
		p.skipSpace()
		if p.eof() {
			p.fail(p.i, "unterminated tag <%s>: expected '>' or '/>'", n.Type)
		}
		switch {
		case p.has("/>"):
			p.i += 2
			return n, true
		case p.src[p.i] == '>':
			p.i++
			return n, false
		}
		if p.i == sp {
			p.fail(p.i, "expected a space, '>' or '/>' in tag <%s>", n.Type)
		}
		apos := p.i
		name := p.name("an attribute name, '>' or '/>'")
		p.skipSpace()
		if p.eof() || p.src[p.i] != '=' {
			p.fail(p.i, "expected '=' after attribute %q", name)
		}
		p.i++
		p.skipSpace()
		if p.eof() || p.src[p.i] != '"' && p.src[p.i] != '\'' {
			p.fail(p.i, "expected the quoted value of attribute %q", name)
		}
		q := p.src[p.i]
		p.i++
		start := p.i
		j := strings.IndexByte(p.src[p.i:], q)
		if j < 0 {
			p.fail(start-1, "unterminated value of attribute %q", name)
		}
		p.i += j + 1
		raw := p.src[start : p.i-1]
		if k := strings.IndexByte(raw, '<'); k >= 0 {
			p.fail(start+k, "'<' in the value of attribute %q (write &lt;)", name)
		}
		v := p.decode(start, raw)
		if a, dup := n.Attr(name); dup {
			p.bad(apos, "duplicate attribute %q of <%s> (first at %d:%d)", name, n.Type, a.Pos.Line, a.Pos.Col)
			continue
		}
		appendAttr(n, Attr{Name: name, Value: v, Pos: p.pos(apos)})
	}
}

func (p *xmlParser) endTag(top *xmlOpen) {
	start := p.i
	p.i += 2
	name := p.name("a node type after '</'")
	p.skipSpace()
	if p.eof() || p.src[p.i] != '>' {
		p.fail(p.i, "expected '>' to end </%s>", name)
	}
	p.i++
	if name != top.n.Type {
		p.fail(start, "</%s> does not close <%s> opened at %d:%d", name, top.n.Type, top.n.Pos.Line, top.n.Pos.Col-1)
	}
	switch {
	case len(top.n.Nodes) > 0 && top.nonBlank:
		// Genode's tree has either sub-nodes or content; HID cannot write both.
		p.bad(top.textOff, "<%s> has both text and sub-nodes; the text is dropped", top.n.Type)
	case top.nonBlank:
		top.n.Content = top.text.String()
	}
}

// text reads character data up to the next '<'.
func (p *xmlParser) text(o *xmlOpen) {
	start := p.i
	j := strings.IndexByte(p.src[p.i:], '<')
	if j < 0 {
		j = len(p.src) - p.i
	}
	p.i += j
	if j > 0 {
		p.addText(o, start, p.src[start:p.i], p.decode(start, p.src[start:p.i]))
	}
}

// addText appends text whose source is raw at offset off. Blank source text is layout, not
// content; a blank written as a character reference (&#32;) is content.
func (p *xmlParser) addText(o *xmlOpen, off int, raw, s string) {
	if !o.nonBlank {
		if t := strings.TrimLeft(raw, " \t\r\n"); t != "" {
			o.nonBlank = true
			o.textOff = off + len(raw) - len(t)
		}
	}
	o.text.WriteString(s)
}

// decode replaces entity references in s, which starts at offset off.
func (p *xmlParser) decode(off int, s string) string {
	if strings.IndexByte(s, '&') < 0 {
		return s
	}
	var b strings.Builder
	for {
		k := strings.IndexByte(s, '&')
		if k < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:k])
		off += k
		s = s[k:]
		e := strings.IndexByte(s, ';')
		if e < 0 || e > 12 {
			p.fail(off, "'&' must start an entity like &amp; (write &amp; for '&')")
		}
		r, ok := entity(s[1:e])
		if !ok {
			p.fail(off, "unknown entity %q", s[:e+1])
		}
		b.WriteString(r)
		off += e + 1
		s = s[e+1:]
	}
}

func entity(name string) (string, bool) {
	switch name {
	case "lt":
		return "<", true
	case "gt":
		return ">", true
	case "amp":
		return "&", true
	case "quot":
		return `"`, true
	case "apos":
		return "'", true
	}
	if !strings.HasPrefix(name, "#") {
		return "", false
	}
	var v uint64
	var err error
	if strings.HasPrefix(name, "#x") {
		v, err = strconv.ParseUint(name[2:], 16, 32)
	} else {
		v, err = strconv.ParseUint(name[1:], 10, 32)
	}
	if err != nil || v == 0 || v > 0x10ffff || v >= 0xd800 && v < 0xe000 {
		return "", false
	}
	return fmt.Sprintf("%c", rune(v)), true
}
