package config

import (
	"bytes"
	"fmt"
	"strings"
)

// XML writes the tree as XML in Genode's layout: one node per line, tabs for nesting, a leaf's
// content between its tags. XML cannot mark a node disabled, so a disabled node becomes a
// comment holding its XML, which is what disabling means. A node with both sub-nodes and
// content (which no parser produces) is written with its sub-nodes only.
func (n *Node) XML() []byte {
	var b bytes.Buffer
	writeXML(&b, n, 0)
	return b.Bytes()
}

func writeXML(b *bytes.Buffer, n *Node, depth int) {
	tabs := strings.Repeat("\t", depth)
	if n.Disabled {
		var in bytes.Buffer
		c := *n
		c.Disabled = false
		writeXML(&in, &c, 0)
		s := strings.TrimSuffix(in.String(), "\n")
		for strings.Contains(s, "--") {
			s = strings.ReplaceAll(s, "--", "- -")
		}
		s = strings.ReplaceAll(s, "\n", "\n"+tabs)
		fmt.Fprintf(b, "%s<!-- %s -->\n", tabs, s)
		return
	}
	b.WriteString(tabs)
	b.WriteByte('<')
	b.WriteString(n.Type)
	for _, a := range n.Attrs {
		b.WriteByte(' ')
		b.WriteString(a.Name)
		b.WriteString(`="`)
		escapeXML(b, a.Value, true)
		b.WriteByte('"')
	}
	switch {
	case len(n.Nodes) > 0:
		b.WriteString(">\n")
		for _, c := range n.Nodes {
			writeXML(b, c, depth+1)
		}
		fmt.Fprintf(b, "%s</%s>\n", tabs, n.Type)
	case n.Content != "":
		b.WriteByte('>')
		s := n.Content
		if strings.TrimLeft(s, " \t\r\n") == "" { // blank text would read as layout
			fmt.Fprintf(b, "&#%d;", s[0])
			s = s[1:]
		}
		escapeXML(b, s, false)
		fmt.Fprintf(b, "</%s>\n", n.Type)
	default:
		b.WriteString("/>\n")
	}
}

// escapeXML writes s with the characters XML reserves, and control characters, as references.
// Inside attribute values, tab and newline are referenced too, so a value stays on one line.
func escapeXML(b *bytes.Buffer, s string, attr bool) {
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var r string
		switch {
		case c == '&':
			r = "&amp;"
		case c == '<':
			r = "&lt;"
		case c == '>' && !attr:
			r = "&gt;"
		case c == '"' && attr:
			r = "&quot;"
		case c < 0x20 && (attr || c != '\t' && c != '\n') || c == 0x7f:
			r = fmt.Sprintf("&#%d;", c)
		default:
			continue
		}
		b.WriteString(s[last:i])
		b.WriteString(r)
		last = i + 1
	}
	b.WriteString(s[last:])
}

// HID writes the tree as HID: each node on its own line with its attributes after " | ",
// the name attribute as the shorthand after the type where it reads back as a name, content
// as ": " lines, two more columns per level, and the end marker. Values HID cannot hold
// (see CheckHID) are written as they are and will not read back.
func (n *Node) HID() []byte {
	var b bytes.Buffer
	writeHID(&b, n, 0)
	b.WriteString("-\n")
	return b.Bytes()
}

func writeHID(b *bytes.Buffer, n *Node, level int) {
	if level > 0 {
		b.WriteString(strings.Repeat(" ", 2*(level-1)))
		if n.Disabled {
			b.WriteString("x ")
		} else {
			b.WriteString("+ ")
		}
	}
	b.WriteString(n.Type)
	attrs := n.Attrs
	if len(attrs) > 0 && attrs[0].Name == "name" && nameShorthand(attrs[0].Value) {
		b.WriteByte(' ')
		b.WriteString(attrs[0].Value)
		attrs = attrs[1:]
	}
	for _, a := range attrs {
		b.WriteString(" | ")
		b.WriteString(a.Name)
		b.WriteByte(':')
		if a.Value != "" {
			b.WriteByte(' ')
			b.WriteString(a.Value)
		}
	}
	b.WriteByte('\n')
	if n.Content != "" && len(n.Nodes) == 0 {
		in := strings.Repeat(" ", 2*level)
		for _, l := range strings.Split(n.Content, "\n") {
			b.WriteString(in)
			b.WriteByte(':')
			if l != "" {
				b.WriteByte(' ')
				b.WriteString(l)
			}
			b.WriteByte('\n')
		}
	}
	for _, c := range n.Nodes {
		writeHID(b, c, level+1)
	}
}

// nameShorthand reports whether a name value reads back as a name after the node type: it
// must not look like "tag: value" (Genode's generator refuses any ':' before a space or the
// end) and must survive trimming.
func nameShorthand(v string) bool {
	if v == "" || strings.TrimSpace(v) != v {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] == ':' && (i+1 == len(v) || v[i+1] == ' ') {
			return false
		}
	}
	return true
}

// CheckHID reports what of the tree HID cannot express, with positions: node types and
// attribute tags outside [a-z][a-z0-9_-]*, values with '|', control characters or leading or
// trailing blanks, content with control characters other than tab, content beside sub-nodes,
// and a disabled top-level node.
func (n *Node) CheckHID() error {
	var errs ErrorList
	if n.Disabled {
		errs = append(errs, Errorf(n.Pos, "the top-level node <%s> cannot be disabled in HID", n.Type))
	}
	walk(n, func(n *Node) {
		if !isIdent(n.Type) {
			errs = append(errs, Errorf(n.Pos, "node type %q is not a HID identifier (a-z, then a-z 0-9 _ -)", n.Type))
		}
		for _, a := range n.Attrs {
			switch {
			case !isIdent(a.Name):
				errs = append(errs, Errorf(a.Pos, "attribute name %q of <%s> is not a HID identifier (a-z, then a-z 0-9 _ -)", a.Name, n.Type))
			case strings.Contains(a.Value, "|"):
				errs = append(errs, Errorf(a.Pos, "value of attribute %q holds '|', which HID cannot express", a.Name))
			case strings.Trim(a.Value, " ") != a.Value:
				errs = append(errs, Errorf(a.Pos, "value of attribute %q has leading or trailing spaces, which HID trims", a.Name))
			default:
				if i, msg := badByte(a.Value, func(byte) bool { return false }); i >= 0 {
					errs = append(errs, Errorf(a.Pos, "value of attribute %q: %s in HID", a.Name, msg))
				}
			}
		}
		if n.Content != "" {
			if len(n.Nodes) > 0 {
				errs = append(errs, Errorf(n.Pos, "<%s> has both content and sub-nodes, which HID cannot express", n.Type))
			} else if i, msg := badByte(n.Content, func(c byte) bool { return c == '\t' || c == '\n' }); i >= 0 {
				errs = append(errs, Errorf(n.Pos, "content of <%s>: %s in HID", n.Type, msg))
			}
		}
	})
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// walk calls fn for n and every node below it, disabled ones included, in document order.
func walk(n *Node, fn func(*Node)) {
	stack := []*Node{n}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		fn(n)
		for i := len(n.Nodes) - 1; i >= 0; i-- {
			stack = append(stack, n.Nodes[i])
		}
	}
}

// Equal reports whether two trees are the same, positions aside: types, disabled marks,
// attributes in order, content and sub-nodes.
func (n *Node) Equal(o *Node) bool { return n.Diff(o) == "" }

// Diff describes the first difference Equal finds, in document order, with the position of
// each side; "" when the trees are the same.
func (n *Node) Diff(o *Node) string {
	switch {
	case n == nil || o == nil:
		if n == o {
			return ""
		}
		return "one tree is empty"
	case n.Type != o.Type:
		return fmt.Sprintf("%s: <%s>, but %s: <%s>", n.Pos, n.Type, o.Pos, o.Type)
	case n.Disabled != o.Disabled:
		return fmt.Sprintf("%s: <%s> disabled=%t, but %s: disabled=%t", n.Pos, n.Type, n.Disabled, o.Pos, o.Disabled)
	case n.Content != o.Content:
		return fmt.Sprintf("%s: <%s> content %q, but %s: %q", n.Pos, n.Type, n.Content, o.Pos, o.Content)
	}
	for i := range max(len(n.Attrs), len(o.Attrs)) {
		switch {
		case i >= len(o.Attrs):
			return fmt.Sprintf("%s: %s=%q of <%s>, but %s: no more attributes", n.Attrs[i].Pos, n.Attrs[i].Name, n.Attrs[i].Value, n.Type, o.Pos)
		case i >= len(n.Attrs):
			return fmt.Sprintf("%s: no more attributes of <%s>, but %s: %s=%q", n.Pos, n.Type, o.Attrs[i].Pos, o.Attrs[i].Name, o.Attrs[i].Value)
		case n.Attrs[i].Name != o.Attrs[i].Name || n.Attrs[i].Value != o.Attrs[i].Value:
			return fmt.Sprintf("%s: %s=%q of <%s>, but %s: %s=%q", n.Attrs[i].Pos, n.Attrs[i].Name, n.Attrs[i].Value, n.Type, o.Attrs[i].Pos, o.Attrs[i].Name, o.Attrs[i].Value)
		}
	}
	for i := range max(len(n.Nodes), len(o.Nodes)) {
		switch {
		case i >= len(o.Nodes):
			return fmt.Sprintf("%s: <%s> in <%s>, but %s: no more sub-nodes", n.Nodes[i].Pos, n.Nodes[i].Type, n.Type, o.Pos)
		case i >= len(n.Nodes):
			return fmt.Sprintf("%s: no more sub-nodes of <%s>, but %s: <%s>", n.Pos, n.Type, o.Nodes[i].Pos, o.Nodes[i].Type)
		}
		if d := n.Nodes[i].Diff(o.Nodes[i]); d != "" {
			return d
		}
	}
	return ""
}
