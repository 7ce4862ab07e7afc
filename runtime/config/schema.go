package config

import (
	"sort"
	"strings"
)

// Schema declares what a component knows of one node type: its attributes and its sub-node
// types. Check reports everything else, with a suggestion when a known name is close, so
// that a typo like tcp_ports is caught instead of silently ignored.
//
//	var route = &config.Schema{Type: "route", Nodes: ...}
//	var start = &config.Schema{Type: "start", Attrs: []string{"name", "caps", "ram"},
//		Nodes: []*config.Schema{route, {Type: "config", Any: true}}}
//
// Declarations may be shared and recursive (a pointer may appear in several places).
type Schema struct {
	Type    string
	Attrs   []string
	Nodes   []*Schema
	Content bool // the node may hold content
	Any     bool // anything below is accepted unchecked (e.g. a component's own <config>)
}

// Check compares the tree at n with s and returns one *Error per unknown node, unknown
// attribute or unexpected content, in document order. Disabled nodes are checked too, as
// Genode checks them. Offline tools treat the result as errors, the run time as warnings.
func Check(n *Node, s *Schema) []*Error {
	var errs []*Error
	if n.Type != s.Type {
		return append(errs, Errorf(n.Pos, "top-level node is <%s>, expected <%s>", n.Type, s.Type))
	}
	type item struct {
		n *Node
		s *Schema
	}
	stack := []item{{n, s}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n, s := it.n, it.s
		if s.Any {
			continue
		}
		for _, a := range n.Attrs {
			if !contains(s.Attrs, a.Name) {
				errs = append(errs, Errorf(a.Pos, "unknown attribute %q of <%s>%s", a.Name, n.Type, suggest(a.Name, s.Attrs)))
			}
		}
		if n.Content != "" && !s.Content {
			errs = append(errs, Errorf(n.Pos, "<%s> takes no content", n.Type))
		}
		var sub []item
		for _, c := range n.Nodes {
			cs := s.node(c.Type)
			if cs == nil {
				names := make([]string, len(s.Nodes))
				for i, k := range s.Nodes {
					names[i] = k.Type
				}
				errs = append(errs, Errorf(c.Pos, "unknown node <%s> in <%s>%s", c.Type, n.Type, suggest(c.Type, names)))
				continue
			}
			sub = append(sub, item{c, cs})
		}
		for i := len(sub) - 1; i >= 0; i-- {
			stack = append(stack, sub[i])
		}
	}
	// A node's unknown sub-nodes are found before its known ones are descended into.
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i].Pos, errs[j].Pos
		return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
	})
	return errs
}

func (s *Schema) node(typ string) *Schema {
	for _, k := range s.Nodes {
		if k.Type == typ {
			return k
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// suggest returns "; did you mean X?" for the known name closest to name, if it is close:
// the same but for '_' versus '-', or a small edit distance.
func suggest(name string, known []string) string {
	best, bestD := "", 0
	for _, k := range known {
		d := distance(name, k)
		if strings.ReplaceAll(name, "_", "-") == strings.ReplaceAll(k, "_", "-") {
			d = 0
		}
		if best == "" || d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" || bestD > 2 || bestD*3 > len(name) {
		return ""
	}
	return "; did you mean " + best + "?"
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
