package config

import (
	"strings"
)

// HID is read line by line. Each line splits at " | " into segments; a segment is a node
// ("+ type [name]" or "x type"), an attribute ("tag: value"), a comment (". ", rest of the
// line) or a content line (": ", rest of the line). A node's column is that of its type;
// a node segment belongs to the innermost open node whose column is smaller, every other
// segment to the innermost open node. That is Genode's reading; strict mode adds the
// indentation rules of doc/hid.txt on top.

type hidOpen struct {
	n          *Node
	col        int // 0-based column of the type
	content    []string
	contentPos Pos
	detached   bool // a broken node: its lines are read and dropped
}

type hidParser struct {
	file    string
	lenient bool
	errs    ErrorList
	warns   []*Error
	fatal   bool
	stack   []*hidOpen
	root    *Node
}

func parseHID(file string, data []byte, opts ParseOptions) (*Node, []*Error, error) {
	if len(data) > MaxSize {
		return nil, nil, ErrorList{tooLarge(file)}
	}
	p := &hidParser{file: file, lenient: opts.Lenient}
	rest := string(data)
	ln := 0
	ended := false
	for rest != "" && !p.fatal && len(p.errs) < maxErrors {
		ln++
		var l string
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			l, rest = rest[:i], rest[i+1:]
		} else {
			l, rest = rest, ""
		}
		l = strings.TrimSuffix(l, "\r") // Genode tolerates CRLF line endings
		if ended {
			// Genode reads no further.
			if strings.Trim(l, " \t") != "" {
				p.bad(p.pos(ln, 0), "text after the end marker '-'")
				break
			}
			continue
		}
		if i, msg := badByte(l, func(c byte) bool { return c == '\t' }); i >= 0 {
			p.fail(p.pos(ln, i), "%s", msg)
			break
		}
		switch {
		case p.root == nil:
			p.beforeTop(l, ln)
		case l != "" && l[0] == '-':
			if l != "-" {
				p.bad(p.pos(ln, 1), "the end marker '-' must stand alone on its line")
			}
			p.closeTo(0)
			ended = true
		default:
			p.segments(l, ln, 0)
		}
	}
	if !p.fatal && len(p.errs) < maxErrors && !ended {
		if p.root == nil {
			p.fail(p.pos(ln+1, 0), "empty config: expected a top-level node type")
		} else {
			p.fail(p.pos(ln+1, 0), "missing the end marker: a line holding only '-' must close <%s> of line %d", p.root.Type, p.root.Pos.Line)
		}
	}
	if len(p.errs) > 0 {
		return nil, p.warns, p.errs
	}
	return p.root, p.warns, nil
}

func (p *hidParser) pos(line, col0 int) Pos { return Pos{File: p.file, Line: line, Col: col0 + 1} }

// fail records an error that rejects the input in either mode.
func (p *hidParser) fail(pos Pos, format string, args ...any) {
	p.errs = append(p.errs, Errorf(pos, format, args...))
	p.fatal = true
}

// bad records a syntax violation: an error offline, a warning at run time.
func (p *hidParser) bad(pos Pos, format string, args ...any) {
	e := Errorf(pos, format, args...)
	if p.lenient {
		p.warns = append(p.warns, e)
	} else {
		p.errs = append(p.errs, e)
	}
}

func (p *hidParser) beforeTop(l string, ln int) {
	t := strings.TrimLeft(l, " ")
	switch {
	case t == "":
	case l[0] >= 'a' && l[0] <= 'z':
		p.segments(l, ln, -1)
	case t == "." || strings.HasPrefix(t, ". "):
		p.bad(p.pos(ln, len(l)-len(t)), "comment above the top-level node")
	default:
		p.fail(p.pos(ln, len(l)-len(t)), "expected the top-level node type (a-z, then a-z 0-9 _ -) at column 1")
	}
}

// segments reads one line from column i; i < 0 marks the line of the top-level node.
func (p *hidParser) segments(l string, ln, i int) {
	if i < 0 {
		end := p.segEnd(l, 0, ln)
		p.node(l[:end], ln, 0, false)
		i = end + 1
	}
	for i < len(l) && !p.fatal {
		for i < len(l) && l[i] == ' ' {
			i++
		}
		if i >= len(l) {
			return
		}
		c := l[i]
		if (c == '+' || c == 'x' || c == '.' || c == ':') && (i+1 == len(l) || l[i+1] == ' ') {
			body := ""
			if i+2 <= len(l) {
				body = l[i+2:]
			}
			switch c {
			case '.':
				return
			case ':':
				p.content(body, ln, i)
				return
			}
			if i+2 > len(l) {
				p.bad(p.pos(ln, i), "expected a node type after %q", c)
				p.push(p.broken(ln, i+2), ln)
				return
			}
			end := p.segEnd(l, i+2, ln)
			p.node(l[i+2:end], ln, i+2, c == 'x')
			i = end + 1
			continue
		}
		if c == '|' { // leading '|' segments are empty, for visual scope only
			if !p.lenient && i+1 < len(l) && l[i+1] != ' ' {
				p.bad(p.pos(ln, i), "'|' must be followed by a space")
			}
			i++
			continue
		}
		end := p.segEnd(l, i, ln)
		p.attr(strings.TrimRight(l[i:end], " "), ln, i)
		i = end + 1
	}
}

// segEnd returns where the segment starting at i ends: at the next '|' or the end of line.
func (p *hidParser) segEnd(l string, i, ln int) int {
	q := strings.IndexByte(l[i:], '|')
	if q < 0 {
		return len(l)
	}
	q += i
	if !p.lenient && (q == 0 || l[q-1] != ' ' || q+1 < len(l) && l[q+1] != ' ') {
		p.bad(p.pos(ln, q), "'|' must be enclosed in spaces (values cannot contain '|')")
	}
	return q
}

func (p *hidParser) noTab(s string, ln, col int) bool {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		p.fail(p.pos(ln, col+i), "tab character: only comments and content may hold tabs, indent with spaces")
		return false
	}
	return true
}

// node reads "type [name | tag: value]" whose type starts at column col.
func (p *hidParser) node(body string, ln, col int, disabled bool) {
	if !p.noTab(body, ln, col) {
		return
	}
	pos := p.pos(ln, col)
	t := ident(body)
	if t == 0 {
		p.bad(pos, "expected a node type (a-z, then a-z 0-9 _ -), found %q", strings.TrimRight(body, " "))
		p.push(p.broken(ln, col), ln)
		return
	}
	n := &Node{Type: body[:t], Disabled: disabled, Pos: pos}
	o := &hidOpen{n: n, col: col}
	if p.root == nil {
		p.root = n
		p.stack = append(p.stack, o)
	} else if !p.push(o, ln) {
		return
	}
	rest := body[t:]
	if rest == "" {
		return
	}
	if rest[0] != ' ' {
		p.bad(p.pos(ln, col+t), "expected a space or ' | ' after the node type %q", n.Type)
		return
	}
	v := strings.TrimLeft(rest, " ")
	vcol := col + t + len(rest) - len(v)
	v = strings.TrimRight(v, " ")
	switch {
	case v == "":
	case tagAhead(v):
		p.attr(v, ln, vcol)
	default: // the shorthand for the name attribute
		appendAttr(n, Attr{Name: "name", Value: v, Pos: p.pos(ln, vcol)})
	}
}

// tagAhead reports whether s starts with "tag:" followed by a space or nothing.
func tagAhead(s string) bool {
	k := ident(s)
	return k > 0 && (s[k:] == ":" || strings.HasPrefix(s[k:], ": "))
}

// broken stands in for a node whose type is missing: it takes the lines that belong to it,
// which are then dropped with it.
func (p *hidParser) broken(ln, col int) *hidOpen {
	return &hidOpen{n: &Node{Type: "invalid", Pos: p.pos(ln, col)}, col: col, detached: true}
}

// push places a new node, read in line ln, below the innermost open node whose column is
// smaller.
func (p *hidParser) push(o *hidOpen, ln int) bool {
	col := o.col
	i := len(p.stack)
	for i > 1 && p.stack[i-1].col >= col {
		i--
	}
	p.closeTo(i)
	parent := p.stack[len(p.stack)-1]
	if !p.lenient && col < parent.col+2 {
		p.bad(p.pos(ln, col-2), "bad indentation: a sub-node of <%s> (line %d) must start at least two columns further in, a sibling at the same column",
			parent.n.Type, parent.n.Pos.Line)
	}
	if parent.content != nil {
		// Genode ignores the content of a node with sub-nodes.
		p.bad(o.n.Pos, "<%s> has content (line %d) and cannot also have sub-nodes", parent.n.Type, parent.contentPos.Line)
		parent.content = nil
	}
	if len(p.stack) >= MaxDepth {
		p.fail(p.pos(ln, col), "nodes nest deeper than %d levels", MaxDepth)
		return false
	}
	if parent.detached {
		o.detached = true
	} else if !o.detached {
		parent.n.Nodes = append(parent.n.Nodes, o.n)
	}
	p.stack = append(p.stack, o)
	return true
}

// closeTo closes the open nodes from depth i on.
func (p *hidParser) closeTo(i int) {
	for len(p.stack) > i {
		o := p.stack[len(p.stack)-1]
		if o.content != nil {
			o.n.Content = strings.Join(o.content, "\n")
		}
		p.stack = p.stack[:len(p.stack)-1]
	}
}

// attr reads "tag: value" (s is trimmed) at column col for the innermost open node.
func (p *hidParser) attr(s string, ln, col int) {
	if !p.noTab(s, ln, col) {
		return
	}
	o := p.stack[len(p.stack)-1]
	pos := p.pos(ln, col)
	k := ident(s)
	if k == 0 || k == len(s) || s[k] != ':' {
		p.bad(pos, "expected 'tag: value', '+ node', 'x node', '. comment' or ': content', found %q", s)
		return
	}
	tag, v := s[:k], s[k+1:]
	if v != "" && v[0] != ' ' && !p.lenient { // at run time the missing space is accepted
		p.bad(p.pos(ln, col+k+1), "expected a space between %q and its value", tag+":")
	}
	v = strings.TrimLeft(v, " ")
	if !p.lenient && col < o.col {
		p.bad(pos, "bad indentation: attribute %q belongs to <%s> (line %d) and must be indented at least to column %d",
			tag, o.n.Type, o.n.Pos.Line, o.col+1)
	}
	if o.content != nil { // Genode stops reading attributes at the first content line
		p.bad(pos, "attribute %q after the content of <%s>", tag, o.n.Type)
		return
	}
	if a, dup := o.n.Attr(tag); dup {
		p.bad(pos, "duplicate attribute %q of <%s> (first at %d:%d)", tag, o.n.Type, a.Pos.Line, a.Pos.Col)
		return
	}
	appendAttr(o.n, Attr{Name: tag, Value: v, Pos: pos})
}

// content adds a ": " line at column col to the innermost open node.
func (p *hidParser) content(text string, ln, col int) {
	o := p.stack[len(p.stack)-1]
	if !p.lenient && col < o.col {
		p.bad(p.pos(ln, col), "bad indentation: content of <%s> (line %d) must be indented at least to column %d",
			o.n.Type, o.n.Pos.Line, o.col+1)
	}
	if o.content == nil {
		o.content = []string{}
		o.contentPos = p.pos(ln, col)
	}
	o.content = append(o.content, text)
}
