package supervisor

import (
	"fmt"
	"strings"

	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/label"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Route is a <route> or <default-route>: rules tried in order, the first match decides.
type Route struct {
	Rules []*Rule
}

// Rule is a <service> or <any-service> node of a route.
type Rule struct {
	Service string // "" for <any-service>
	Match   LabelMatch
	Targets []*Target
	Pos     config.Pos
}

func (r *Rule) String() string {
	if r.Service == "" {
		return "<any-service>"
	}
	return fmt.Sprintf("<service name=%q%s>", r.Service, r.Match)
}

// LabelMatch is the label condition of a rule, as Genode's init reads it: label,
// label_prefix and label_suffix (all that are present must hold, label.Selector) are matched
// against the label the client asked for, without its own name ("scoped"); label_last against
// the last element of the whole label and decides alone; unscoped_label against the whole
// label ("client -> label") and decides alone, whatever else the rule says.
type LabelMatch struct {
	label.Selector
	Last, Unscoped       string
	HasLast, HasUnscoped bool
}

// Matches reports whether the session label of client's request matches.
func (m LabelMatch) Matches(client, l string) bool {
	switch {
	case m.HasUnscoped:
		return label.Prefixed(client, l) == m.Unscoped
	case m.HasLast:
		return label.Last(label.Prefixed(client, l)) == m.Last
	}
	return !m.Conflicts(l)
}

func (m LabelMatch) String() string {
	var b strings.Builder
	for _, a := range []struct {
		name, value string
		has         bool
	}{{"label", m.Label, m.HasLabel}, {"label_prefix", m.Prefix, m.HasPrefix}, {"label_suffix", m.Suffix, m.HasSuffix},
		{"label_last", m.Last, m.HasLast}, {"unscoped_label", m.Unscoped, m.HasUnscoped}} {
		if a.has {
			fmt.Fprintf(&b, " %s=%q", a.name, a.value)
		}
	}
	return b.String()
}

// TargetKind says where a rule sends a session.
type TargetKind int

const (
	TargetParent TargetKind = iota
	TargetChild
	TargetAnyChild
)

// Target is a <parent/>, <child name/> or <any-child/>, with an optional label rewrite.
type Target struct {
	Kind     TargetKind
	Child    string
	Label    string
	HasLabel bool
	// TxQueueBytes and RxQueueBytes bound the bytes in flight of a packet-stream session's
	// sources, as Genode's session arguments tx_buf_size and rx_buf_size size its buffers:
	// tx_queue_bytes the client's (its TX stream), rx_queue_bytes the server's (its RX
	// stream); 0: none; -1: not given, the default (QueueBounds).
	TxQueueBytes, RxQueueBytes int
	Pos                        config.Pos
}

// QueueBounds are the bounds of the bytes in flight (packetstream.Source.SetQueueBytes) of a
// session's sources, the client's TX stream of geometry tx and the server's RX stream, as
// target t (nil: none) gives them. By default the client's is tx.DefaultQueueBytes(): a
// client's source (a guest's stack, a driver's RX path, a TAP's reader) has no scheduler above
// it, so the stream would hold a standing queue; the server's none, as the server is where a
// scheduler sits (nic_router's <fq-codel>, which sizes its queue within the stream).
func QueueBounds(t *Target, tx packetstream.Config) (txBytes, rxBytes int) {
	txBytes = tx.DefaultQueueBytes()
	if t != nil && t.TxQueueBytes >= 0 {
		txBytes = t.TxQueueBytes
	}
	if t != nil && t.RxQueueBytes >= 0 {
		rxBytes = t.RxQueueBytes
	}
	return txBytes, rxBytes
}

// maxQueueBytes bounds tx_queue_bytes and rx_queue_bytes: a stream's buffer at most.
const maxQueueBytes = packetstream.MaxBulkSize

func (t *Target) String() string {
	s := "<parent/>"
	switch t.Kind {
	case TargetChild:
		s = fmt.Sprintf("<child name=%q/>", t.Child)
	case TargetAnyChild:
		s = "<any-child/>"
	}
	if t.HasLabel {
		s = strings.TrimSuffix(s, "/>") + fmt.Sprintf(" label=%q/>", t.Label)
	}
	return s
}

func parseRoute(n *config.Node) (*Route, error) {
	var e errs
	r := &Route{}
	for _, c := range n.Children() {
		rule := &Rule{Pos: c.Pos}
		switch c.Type {
		case "service":
			rule.Service = c.Name()
			if rule.Service == "" {
				e.add(config.Errorf(c.Pos, "<service> in <%s> needs a name", n.Type))
			}
			m := &rule.Match
			m.Selector = label.SelectorOf(c)
			m.Last, m.HasLast = attr(c, "label_last")
			m.Unscoped, m.HasUnscoped = attr(c, "unscoped_label")
		case "any-service":
		default:
			continue // reported by the schema check
		}
		for _, t := range c.Children() {
			target := &Target{Pos: t.Pos, TxQueueBytes: -1, RxQueueBytes: -1}
			switch t.Type {
			case "parent":
				target.Kind = TargetParent
			case "child":
				target.Kind, target.Child = TargetChild, t.Name()
				if target.Child == "" {
					e.add(config.Errorf(t.Pos, "<child> needs a name"))
				}
			case "any-child":
				target.Kind = TargetAnyChild
			default:
				continue
			}
			if a, ok := t.Attr("label"); ok {
				target.Label, target.HasLabel = a.Value, true
			}
			for _, q := range []struct {
				name string
				v    *int
			}{{"tx_queue_bytes", &target.TxQueueBytes}, {"rx_queue_bytes", &target.RxQueueBytes}} {
				if !t.Has(q.name) {
					continue
				}
				v, err := t.Number(q.name, 0)
				if err == nil && v > maxQueueBytes {
					a, _ := t.Attr(q.name)
					err = config.Errorf(a.Pos, "%s=%q: more than a stream's largest buffer (%d bytes)", q.name, a.Value, maxQueueBytes)
				}
				if err != nil {
					e.add(err)
					continue
				}
				*q.v = int(v)
			}
			rule.Targets = append(rule.Targets, target)
		}
		if len(rule.Targets) == 0 {
			e.add(config.Errorf(c.Pos, "<%s> in <%s> has no target (<parent/>, <child name/> or <any-child/>)", c.Type, n.Type))
		}
		r.Rules = append(r.Rules, rule)
	}
	return r, e.err()
}

// attr returns the value of n's attribute name and whether it is there.
func attr(n *config.Node, name string) (string, bool) {
	a, ok := n.Attr(name)
	return a.Value, ok
}

// Decision is the outcome of routing one session request.
type Decision struct {
	Parent bool   // the parent (the supervisor) serves it
	Server string // otherwise the child that serves it
	Label  string // the label the server sees
	// Route names the route that decided ("default-route" or "route of CLIENT"), Rule and
	// Target the rule and target in it.
	Route  string
	Rule   *Rule
	Target *Target
	// Trace lists each rule and target tried, for denials and -v.
	Trace []string
}

// DeniedError is a session request no rule routes; its message carries the rule trace.
type DeniedError struct {
	Client, Service, Label string
	Reason                 string
	Trace                  []string
}

func (e *DeniedError) Error() string {
	msg := fmt.Sprintf("session %s %q of %q denied: %s", e.Service, e.Label, e.Client, e.Reason)
	if len(e.Trace) > 0 {
		msg += "\n  tried: " + strings.Join(e.Trace, "\n  tried: ")
	}
	return msg
}

// Resolve routes a request of client for service with label, as Genode's init does: the
// client's own <route> if it has one, else <default-route>. The rules are tried in order;
// of a rule that matches the service and label, each target in turn. A target that cannot
// serve it (the parent does not provide it, the child does not, <any-child/> finds none or
// several) passes to the next. When no target of a <service> rule can, the request is
// denied; when none of an <any-service> rule can, the next rule is tried. <child name/>
// may name an <alias>.
func (sc *Scenario) Resolve(client *Start, service, sessionLabel string) (*Decision, error) {
	r, which := client.Route, "route of "+client.Name
	if r == nil {
		r, which = sc.DefaultRoute, "default-route"
	}
	deny := func(reason string, trace []string) error {
		return &DeniedError{Client: client.Name, Service: service, Label: sessionLabel, Reason: reason, Trace: trace}
	}
	if r == nil {
		return nil, deny(fmt.Sprintf("%q has no <route> and the scenario has no <default-route>", client.Name), nil)
	}
	var trace []string
	reason := "no rule matches"
	for _, rule := range r.Rules {
		name := rule.String()
		if rule.Service != "" && rule.Service != service || !rule.Match.Matches(client.Name, sessionLabel) {
			trace = append(trace, fmt.Sprintf("%s: %s at %s does not match", which, name, rule.Pos))
			continue
		}
		for _, t := range rule.Targets {
			d := &Decision{Label: label.Prefixed(client.Name, sessionLabel), Route: which, Rule: rule, Target: t}
			if t.HasLabel {
				d.Label = t.Label
			}
			cannot := func(why string) {
				trace = append(trace, fmt.Sprintf("%s: %s -> %s at %s: %s", which, name, t, t.Pos, why))
			}
			switch t.Kind {
			case TargetParent:
				if !contains(sc.ParentProvides, service) {
					cannot("the parent does not provide " + service)
					continue
				}
				d.Parent = true
			case TargetChild:
				s := sc.Child(t.Child)
				if s == nil {
					cannot("no such child")
					continue
				}
				if !contains(s.Provides, service) {
					cannot(fmt.Sprintf("%q does not provide %s", s.Name, service))
					continue
				}
				d.Server = s.Name
			case TargetAnyChild:
				var providers []string
				for _, s := range sc.Starts {
					if s.Name != client.Name && contains(s.Provides, service) {
						providers = append(providers, s.Name)
					}
				}
				if len(providers) > 1 {
					cannot("ambiguous, provided by " + strings.Join(providers, ", "))
					continue
				}
				if len(providers) == 0 {
					cannot("no child provides " + service)
					continue
				}
				d.Server = providers[0]
			}
			d.Trace = append(trace, fmt.Sprintf("%s: %s -> %s at %s", which, name, t, t.Pos))
			return d, nil
		}
		if rule.Service != "" {
			return nil, deny("no target of the first matching <service> rule can serve it", trace)
		}
		reason = "no target of a matching <any-service> rule can serve it, nor a later rule"
	}
	return nil, deny(reason, trace)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
