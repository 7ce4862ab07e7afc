// Package config is Genode's config language: one node tree, read from XML or HID, written to
// either, with typed accessors whose errors name the file, line and column.
package config

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Pos is a place in a source file; Line and Col count from 1.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	if p.File == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Error is a config error at a position, printed as FILE:LINE:COL: message.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// Errorf makes an *Error at pos.
func Errorf(pos Pos, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// Attr is one attribute of a node, in source order.
type Attr struct {
	Name  string
	Value string
	Pos   Pos // where the attribute's name starts
}

// Node is one node of the tree. Disabled nodes (HID's "x ") stay in the tree so that tools
// can check and re-emit them; the accessors Sub, Subs and Children skip them.
type Node struct {
	Type     string
	Attrs    []Attr
	Nodes    []*Node // every sub-node in order, disabled ones included
	Content  string  // raw content (XML text, HID ": " lines)
	Disabled bool
	Pos      Pos
}

// Attr returns the first attribute called name (at run time the first duplicate wins).
func (n *Node) Attr(name string) (Attr, bool) {
	for _, a := range n.Attrs {
		if a.Name == name {
			return a, true
		}
	}
	return Attr{}, false
}

// Clone is a deep copy of n: a tool's variant of a node (a bench's copies of a guest or domain).
func (n *Node) Clone() *Node {
	c := *n
	c.Attrs = slices.Clone(n.Attrs)
	c.Nodes = make([]*Node, len(n.Nodes))
	for i, s := range n.Nodes {
		c.Nodes[i] = s.Clone()
	}
	return &c
}

// Set gives attribute name the value, adding it after the others if the node lacks it: how
// a tool derives a scenario from another (the benches' variants).
func (n *Node) Set(name, value string) {
	for i := range n.Attrs {
		if n.Attrs[i].Name == name {
			n.Attrs[i].Value = value
			return
		}
	}
	n.Attrs = append(n.Attrs, Attr{Name: name, Value: value})
}

// Remove takes every child of type typ out of the node, keeping the others in order: how a
// tool takes a node out of a scenario before it puts its own variant in (the benches').
func (n *Node) Remove(typ string) {
	n.Nodes = slices.DeleteFunc(n.Nodes, func(c *Node) bool { return c.Type == typ })
}

// Has reports whether the node has attribute name.
func (n *Node) Has(name string) bool { _, ok := n.Attr(name); return ok }

// Name is the attribute "name", the one HID writes after the type.
func (n *Node) Name() string { return n.String("name", "") }

// String returns attribute name, or def when absent.
func (n *Node) String(name, def string) string {
	if a, ok := n.Attr(name); ok {
		return a.Value
	}
	return def
}

// Children returns the enabled sub-nodes in order.
func (n *Node) Children() []*Node {
	out := make([]*Node, 0, len(n.Nodes))
	for _, c := range n.Nodes {
		if !c.Disabled {
			out = append(out, c)
		}
	}
	return out
}

// Sub returns the first enabled sub-node of type typ, or nil.
func (n *Node) Sub(typ string) *Node {
	for _, c := range n.Nodes {
		if !c.Disabled && c.Type == typ {
			return c
		}
	}
	return nil
}

// Subs returns every enabled sub-node of type typ.
func (n *Node) Subs(typ string) []*Node {
	var out []*Node
	for _, c := range n.Nodes {
		if !c.Disabled && c.Type == typ {
			out = append(out, c)
		}
	}
	return out
}

// attrErr names the attribute's position and the form that was expected.
func attrErr(n *Node, a Attr, want string) error {
	return Errorf(a.Pos, "attribute %q of <%s>: %q is not %s", a.Name, n.Type, a.Value, want)
}

// Bool reads yes/no/true/false.
func (n *Node) Bool(name string, def bool) (bool, error) {
	a, ok := n.Attr(name)
	if !ok {
		return def, nil
	}
	switch a.Value {
	case "yes", "true":
		return true, nil
	case "no", "false":
		return false, nil
	}
	return def, attrErr(n, a, "a boolean (yes, no, true, false)")
}

// Number reads an unsigned number, decimal or 0x hex, with an optional K, M or G suffix
// (powers of 1024, as Genode writes RAM sizes).
func (n *Node) Number(name string, def uint64) (uint64, error) {
	a, ok := n.Attr(name)
	if !ok {
		return def, nil
	}
	v, err := ParseNumber(a.Value)
	if err != nil {
		return def, attrErr(n, a, "a number (like 42, 0x2a, 16K, 10M, 1G)")
	}
	return v, nil
}

// ParseNumber parses a number with an optional K, M or G suffix.
func ParseNumber(s string) (uint64, error) {
	mul := uint64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mul, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mul, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(s, "G"):
		mul, s = 1<<30, s[:len(s)-1]
	}
	// Decimal or 0x hex only: Go's base prefixes 0b, 0o and digit underscores are not Genode's.
	base := 10
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		base, s = 16, s[2:]
	}
	v, err := strconv.ParseUint(s, base, 64)
	if err != nil {
		return 0, err
	}
	if v > ^uint64(0)/mul {
		return 0, strconv.ErrRange
	}
	return v * mul, nil
}

// IPv4 reads a dotted IPv4 address.
func (n *Node) IPv4(name string) (netip.Addr, bool, error) {
	a, ok := n.Attr(name)
	if !ok {
		return netip.Addr{}, false, nil
	}
	ip, err := netip.ParseAddr(a.Value)
	if err != nil || !ip.Is4() {
		return netip.Addr{}, true, attrErr(n, a, "an IPv4 address (like 10.0.1.1)")
	}
	return ip, true, nil
}

// Prefix reads an IPv4 address with prefix length, "a.b.c.d/len". The address part is kept
// as written (a router's interface address is not masked).
func (n *Node) Prefix(name string) (netip.Prefix, bool, error) {
	a, ok := n.Attr(name)
	if !ok {
		return netip.Prefix{}, false, nil
	}
	p, err := netip.ParsePrefix(a.Value)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, true, attrErr(n, a, "an IPv4 prefix (like 10.0.1.1/24)")
	}
	return p, true, nil
}

// IPv6 reads an IPv6 address, "2001:db8::1" or a link-local "fe80::1" (no zone, no
// IPv4-mapped form).
func (n *Node) IPv6(name string) (netip.Addr, bool, error) {
	a, ok := n.Attr(name)
	if !ok {
		return netip.Addr{}, false, nil
	}
	ip, err := netip.ParseAddr(a.Value)
	if err != nil || !ip.Is6() || ip.Is4In6() || ip.Zone() != "" {
		return netip.Addr{}, true, attrErr(n, a, "an IPv6 address (like 2001:db8::1)")
	}
	return ip, true, nil
}

// Prefix6 reads an IPv6 address with prefix length, "2001:db8::2/64", kept as written.
func (n *Node) Prefix6(name string) (netip.Prefix, bool, error) {
	a, ok := n.Attr(name)
	if !ok {
		return netip.Prefix{}, false, nil
	}
	p, err := netip.ParsePrefix(a.Value)
	if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() {
		return netip.Prefix{}, true, attrErr(n, a, "an IPv6 prefix (like 2001:db8::2/64)")
	}
	return p, true, nil
}

// MAC reads a MAC address, "02:02:02:02:02:01".
func (n *Node) MAC(name string) (net.HardwareAddr, bool, error) {
	a, ok := n.Attr(name)
	if !ok {
		return nil, false, nil
	}
	m, err := net.ParseMAC(a.Value)
	if err != nil || len(m) != 6 {
		return nil, true, attrErr(n, a, "a MAC address (like 02:02:02:02:02:01)")
	}
	return m, true, nil
}

// Duration reads a Go duration ("1.5s", "200ms") or a bare number of unit.
func (n *Node) Duration(name string, unit, def time.Duration) (time.Duration, error) {
	a, ok := n.Attr(name)
	if !ok {
		return def, nil
	}
	if v, err := strconv.ParseUint(a.Value, 10, 32); err == nil {
		if unit > 0 && time.Duration(v) > math.MaxInt64/unit {
			return def, attrErr(n, a, "a duration that fits in 292 years")
		}
		return time.Duration(v) * unit, nil
	}
	d, err := time.ParseDuration(a.Value)
	if err != nil || d < 0 {
		return def, attrErr(n, a, "a duration (like 10, 1.5s, 200ms)")
	}
	return d, nil
}
