// The graph: a scenario's picture as Graphviz DOT, what `nicstack graph` prints. It plans as
// a run does, without starting anything: each <start> placed on the CPUs Place gives it, each
// session its component would request (its Spec's Sessions) routed by Resolve, and a session
// that would be denied drawn with the reason.

package supervisor

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/label"
)

// GraphOptions are what a graph needs beside the scenario.
type GraphOptions struct {
	Components component.Table // which sessions each component requests
	// Topology is the machine the starts are placed on (ReadTopology, or NewTopology for
	// another).
	Topology *Topology
	// ParentServices are the services the supervisor serves itself, as Options has them: a
	// session routed to the parent for another is denied. Nil: none.
	ParentServices map[string]ParentService
}

// The graph's own nodes have names no <start> can have (those hold no '/').
const (
	parentNode = "/parent"
	deniedNode = "/denied"
)

// graphEdge is one session: from its client to its server.
type graphEdge struct {
	client, service, label string // as the client asks
	to                     string // the server's node
	text                   []string
	denied                 bool
}

// Graph returns sc's topology as Graphviz DOT: a node per <start> with its binary, CPUs and
// the services it provides, the parent with what it provides, and an edge per session a
// child requests, from client to server, labelled with the service, the label the server
// sees and the route rule that chose the server. A denied session goes, dashed and red, to a
// node "denied", with the reason. Nodes and edges are sorted: the same scenario gives the
// same text.
func Graph(sc *Scenario, opts GraphOptions) string {
	topo := opts.Topology
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", quote(sc.File))
	fmt.Fprintf(&b, "\tlabel=%s;\n\tlabelloc=t;\n", quote(fmt.Sprintf("%s: affinity space %s on a machine of %s (cores x threads)",
		sc.File, sc.Space, topo.Space())))
	b.WriteString("\tnode [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=11];\n")
	b.WriteString("\tedge [fontname=\"Helvetica\", fontsize=9];\n")
	provides := "provides " + strings.Join(sc.ParentProvides, ", ")
	if len(sc.ParentProvides) == 0 {
		provides = "provides nothing"
	}
	// At the bottom, under its children, as Genode draws init.
	fmt.Fprintf(&b, "\t%s [label=%s, shape=house];\n\t{ rank=sink; %[1]s; }\n", quote(parentNode), quote("parent (nicstack)\n"+provides))

	starts := slices.Clone(sc.Starts)
	slices.SortFunc(starts, func(a, b *Start) int { return strings.Compare(a.Name, b.Name) })
	var edges []graphEdge
	for _, st := range starts {
		lines := []string{st.Name}
		attrs := ""
		spec, err := opts.Components.Lookup(st.Binary)
		_, program := programArgs(opts.Components, st)
		switch {
		case program:
			lines = append(lines, "program "+st.Binary)
			attrs = ", shape=component, style=solid"
		case err != nil:
			lines = append(lines, fmt.Sprintf("binary %s (no nicstack component)", st.Binary))
			attrs = ", color=red, fontcolor=red"
		default:
			lines = append(lines, "binary "+st.Binary)
		}
		p := Place(st, sc.Space, topo)
		cpu := fmt.Sprintf("affinity %s -> CPU %s", p.Virtual, p.CPUs)
		if len(p.CPUs) > 1 {
			cpu = fmt.Sprintf("affinity %s -> CPUs %s", p.Virtual, p.CPUs)
		}
		if p.Warning != "" {
			cpu += " (outside the space, so the whole)"
		}
		lines = append(lines, cpu)
		if len(st.Provides) > 0 {
			lines = append(lines, "provides "+strings.Join(st.Provides, ", "))
		}
		if d := sc.ConfigROM(st); d != nil {
			lines = append(lines, "config from ROM of "+d.Server)
			edges = append(edges, routedEdge(sc, st, "ROM", "config", d, "its config, requested by init"))
		} else if err == nil && !program && spec.Sessions != nil {
			n := st.Config
			if n == nil {
				n = &config.Node{Type: "config", Pos: st.Node.Pos}
			}
			cfg, _, _ := spec.Check(n, st.Name) // nil when refused: nothing to draw
			for _, r := range spec.Sessions(cfg) {
				edges = append(edges, sessionEdge(sc, st, r, opts.ParentServices))
			}
		}
		fmt.Fprintf(&b, "\t%s [label=%s%s];\n", quote(st.Name), quote(strings.Join(lines, "\n")), attrs)
	}

	slices.SortStableFunc(edges, func(a, b graphEdge) int {
		return cmp.Or(strings.Compare(a.client, b.client), strings.Compare(a.service, b.service), strings.Compare(a.label, b.label))
	})
	if slices.ContainsFunc(edges, func(e graphEdge) bool { return e.denied }) {
		fmt.Fprintf(&b, "\t%s [label=\"denied\", shape=octagon, style=dashed, color=red, fontcolor=red];\n", quote(deniedNode))
	}
	for _, e := range edges {
		attrs := ""
		if e.denied {
			attrs = ", style=dashed, color=red, fontcolor=red"
		}
		fmt.Fprintf(&b, "\t%s -> %s [label=%s%s];\n", quote(e.client), quote(e.to), quote(strings.Join(e.text, "\n")), attrs)
	}
	b.WriteString("}\n")
	return b.String()
}

// sessionEdge routes r of client st as the supervisor routes a request (request).
func sessionEdge(sc *Scenario, st *Start, r component.SessionRequest, served map[string]ParentService) graphEdge {
	d, err := sc.Resolve(st, r.Service, r.Label)
	if err == nil && d.Parent {
		if _, ok := served[r.Service]; !ok {
			err = noParentService(r.Service, served)
		}
	}
	if err == nil {
		return routedEdge(sc, st, r.Service, r.Label, d, "")
	}
	e := graphEdge{client: st.Name, service: r.Service, label: r.Label, to: deniedNode, denied: true,
		text: []string{fmt.Sprintf("%s %q", r.Service, label.Prefixed(st.Name, r.Label))}}
	if de, ok := err.(*DeniedError); ok {
		e.text = append(e.text, de.Reason)
		for _, t := range de.Trace {
			e.text = append(e.text, "tried "+strings.ReplaceAll(t, " at "+sc.File+":", " at line "))
		}
	} else {
		e.text = append(e.text, err.Error())
	}
	return e
}

// routedEdge is the edge of a session d routes; note, when given, says more of it.
func routedEdge(sc *Scenario, st *Start, service, sessionLabel string, d *Decision, note string) graphEdge {
	e := graphEdge{client: st.Name, service: service, label: sessionLabel, to: d.Server,
		text: []string{fmt.Sprintf("%s %q", service, d.Label)}}
	if d.Parent {
		e.to = parentNode
	}
	e.text = append(e.text, fmt.Sprintf("%s: %s -> %s at line %d", d.Route, d.Rule, d.Target, d.Target.Pos.Line))
	if note != "" {
		e.text = append(e.text, note)
	}
	return e
}

// quote makes s a DOT string: quotes and backslashes escaped, lines joined by \n.
func quote(s string) string {
	s = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
	return `"` + s + `"`
}
