// Package label composes and matches Genode session labels: the one matcher that init's
// routes and every server's <policy> selection (nic_router, nic_perf, uplinks) share, so that
// label, label_prefix and label_suffix mean the same wherever a config says them.
package label

import (
	"strings"

	"github.com/nicstack/nicstack/runtime/config"
)

// Separator joins the elements of a label: "init -> vm -> uplink".
const Separator = " -> "

// Prefixed is the label a server sees for a session that client requested with label. As in
// Genode, the client's name always comes first, and an empty label still gives the
// separator ("vm -> "), which is why Genode's policies say label="vm -> ".
func Prefixed(client, label string) string { return client + Separator + label }

// Last is the part of label after its last separator. As Genode's
// Session_label::last_element, a separator at the very start is not one.
func Last(label string) string {
	for i := len(label) - len(Separator); i > 0; i-- {
		if label[i:i+len(Separator)] == Separator {
			return label[i+len(Separator):]
		}
	}
	return label
}

// Selector is the label condition of a <policy> (or of a route's <service>): label,
// label_prefix and label_suffix, each optional. All that are present must hold.
type Selector struct {
	Label, Prefix, Suffix          string
	HasLabel, HasPrefix, HasSuffix bool
}

// SelectorOf reads the label attributes of n.
func SelectorOf(n *config.Node) Selector {
	var s Selector
	s.Label, s.HasLabel = attr(n, "label")
	s.Prefix, s.HasPrefix = attr(n, "label_prefix")
	s.Suffix, s.HasSuffix = attr(n, "label_suffix")
	return s
}

func attr(n *config.Node, name string) (string, bool) {
	a, ok := n.Attr(name)
	return a.Value, ok
}

// Empty reports whether no label attribute is present: such a <policy> never matches (only
// <default-policy> catches what no policy selects), while such a route rule matches every label.
func (s Selector) Empty() bool { return !s.HasLabel && !s.HasPrefix && !s.HasSuffix }

// Conflicts reports whether an attribute that is present does not hold for label.
func (s Selector) Conflicts(label string) bool {
	return (s.HasLabel && label != s.Label) ||
		(s.HasPrefix && !strings.HasPrefix(label, s.Prefix)) ||
		(s.HasSuffix && !strings.HasSuffix(label, s.Suffix))
}

// Matches reports whether a <policy> with this selector applies to label.
func (s Selector) Matches(label string) bool { return !s.Empty() && !s.Conflicts(label) }

// stronger reports whether s (matching label) beats o, an earlier candidate, as Genode's
// Xml_node_label_score ranks them: a label beats no label; then a prefix beats none and a
// longer prefix a shorter one; then the same for the suffix. A tie keeps the earlier one.
func (s Selector) stronger(o Selector, label string) bool {
	if !s.Matches(label) {
		return false
	}
	if !o.Matches(label) {
		return true
	}
	if s.HasLabel != o.HasLabel {
		return s.HasLabel
	}
	if o.HasLabel {
		return false
	}
	if s.HasPrefix != o.HasPrefix {
		return s.HasPrefix
	}
	if s.HasPrefix && len(s.Prefix) != len(o.Prefix) {
		return len(s.Prefix) > len(o.Prefix)
	}
	if s.HasSuffix != o.HasSuffix {
		return s.HasSuffix
	}
	return s.HasSuffix && len(s.Suffix) > len(o.Suffix)
}

// Best returns the index of the policy that selects label, as Genode's Session_policy picks
// it among a server's <policy> nodes (n of them, the selector of the i-th from sel), or -1
// when none matches; the caller then falls back to its <default-policy>, if it has one.
func Best(n int, sel func(i int) Selector, label string) int {
	best := -1
	var bestSel Selector
	for i := 0; i < n; i++ {
		s := sel(i)
		if s.stronger(bestSel, label) {
			best, bestSel = i, s
		}
	}
	return best
}

// Policy returns the <policy> sub-node of n that selects label, else its <default-policy>,
// else nil: the node a server reads the session's settings from.
func Policy(n *config.Node, label string) *config.Node {
	policies := n.Subs("policy")
	if i := Best(len(policies), func(i int) Selector { return SelectorOf(policies[i]) }, label); i >= 0 {
		return policies[i]
	}
	return n.Sub("default-policy")
}
