package supervisor

import (
	"slices"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
)

// graphScenario has a parent service, routes by label (one rewriting it), a route to a child
// that is not there, a parent service the supervisor does not serve, and a program.
const graphScenario = `<config>
	<parent-provides> <service name="LOG"/> <service name="Tap"/> <service name="Timer"/> </parent-provides>
	<default-route> <any-service> <parent/> <any-child/> </any-service> </default-route>
	<affinity-space width="2" height="2"/>
	<start name="vm">
		<affinity xpos="0" ypos="1"/>
		<route>
			<service name="Nic" label_prefix="net"> <child name="router" label="vm"/> </service>
			<service name="Nic"> <child name="gone"/> </service>
			<any-service> <parent/> </any-service>
		</route>
		<config> <session service="Nic" label="net0"/> <session service="Nic" label="other"/> <session service="Timer"/> </config>
	</start>
	<start name="router">
		<binary name="rtr"/>
		<affinity xpos="1" ypos="0"/>
		<provides> <service name="Nic"/> <service name="Uplink"/> </provides>
	</start>
	<start name="drv"> <affinity xpos="0" ypos="0"/> <config/> </start>
	<start name="qemu"> <config> <arg value="qemu-system-x86_64"/> </config> </start>
</config>`

// graphTable: rtr requests nothing, drv its Uplink and a Tap, vm the sessions its config lists.
var graphTable = component.Table{
	{Binary: "rtr"},
	{Binary: "drv", Sessions: func(any) []component.SessionRequest {
		return []component.SessionRequest{{Service: "Uplink", Label: "uplink"}, {Service: "Tap"}}
	}},
	{Binary: "vm", Sessions: func(cfg any) (out []component.SessionRequest) {
		n := cfg.(*config.Node) // no Parse: the typed config is the node
		for _, s := range n.Subs("session") {
			out = append(out, component.SessionRequest{Service: s.String("service", ""), Label: s.String("label", "")})
		}
		return out
	}},
}

func graphOf(t *testing.T, xml string) string {
	t.Helper()
	return Graph(mustScenario(t, xml), GraphOptions{
		Components: graphTable, Topology: NewTopology(2, 2), ParentServices: map[string]ParentService{"Tap": nil},
	})
}

// lines returns the lines of dot that hold want, in order.
func linesWith(dot, want string) []string {
	var out []string
	for _, l := range strings.Split(dot, "\n") {
		if strings.Contains(l, want) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

func TestGraph(t *testing.T) {
	dot := graphOf(t, graphScenario)
	nodes := []string{
		`"/parent" [label="parent (nicstack)\nprovides LOG, Tap, Timer", shape=house];`,
		`"drv" [label="drv\nbinary drv\naffinity (0,0) 1x1 -> CPU 0"];`,
		`"qemu" [label="qemu\nprogram qemu\naffinity (0,0) 2x2 -> CPUs 0-3", shape=component, style=solid];`,
		`"router" [label="router\nbinary rtr\naffinity (1,0) 1x1 -> CPU 1\nprovides Nic, Uplink"];`,
		`"vm" [label="vm\nbinary vm\naffinity (0,1) 1x1 -> CPU 2"];`,
		`"/denied" [label="denied", shape=octagon, style=dashed, color=red, fontcolor=red];`,
	}
	var got []string
	for _, l := range linesWith(dot, "[label=") {
		if !strings.Contains(l, ` -> "`) {
			got = append(got, l)
		}
	}
	if !slices.Equal(got, nodes) {
		t.Errorf("nodes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(nodes, "\n"))
	}
	edges := []string{
		// The parent serves Tap; the default-route's first target takes it.
		`"drv" -> "/parent" [label="Tap \"drv -> \"\ndefault-route: <any-service> -> <parent/> at line 3"];`,
		// The parent provides no Uplink: the next target, the one child that does.
		`"drv" -> "router" [label="Uplink \"drv -> uplink\"\ndefault-route: <any-service> -> <any-child/> at line 3"];`,
		// A label route that rewrites the label the server sees.
		`"vm" -> "router" [label="Nic \"vm\"\nroute of vm: <service name=\"Nic\" label_prefix=\"net\"> -> <child name=\"router\" label=\"vm\"/> at line 8"];`,
		// A route to a child that is not there.
		`"vm" -> "/denied" [label="Nic \"vm -> other\"\nno target of the first matching <service> rule can serve it\n` +
			`tried route of vm: <service name=\"Nic\" label_prefix=\"net\"> at line 8:5 does not match\n` +
			`tried route of vm: <service name=\"Nic\"> -> <child name=\"gone\"/> at line 9:26: no such child", style=dashed, color=red, fontcolor=red];`,
		// Routed to the parent, which provides it but nicstack does not serve.
		`"vm" -> "/denied" [label="Timer \"vm -> \"\nrouted to the parent, but the supervisor serves no Timer sessions itself (it serves: Tap)", style=dashed, color=red, fontcolor=red];`,
	}
	if got := linesWith(dot, `" -> "`); !slices.Equal(got, edges) {
		t.Errorf("edges:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(edges, "\n"))
	}
}

// The same scenario gives the same text, and the order of its <start>s does not matter.
func TestGraphDeterministic(t *testing.T) {
	a := graphOf(t, graphScenario)
	if b := graphOf(t, graphScenario); a != b {
		t.Fatalf("two graphs of one scenario differ:\n%s\n%s", a, b)
	}
	// Moving drv's <start> first changes no line but those naming a line of the file.
	moved := strings.Replace(graphScenario, `	<start name="drv"> <affinity xpos="0" ypos="0"/> <config/> </start>
`, "", 1)
	moved = strings.Replace(moved, `	<start name="vm">`, `	<start name="drv"> <affinity xpos="0" ypos="0"/> <config/> </start>
	<start name="vm">`, 1)
	if moved == graphScenario {
		t.Fatal("the scenario did not change")
	}
	noLines := func(dot string) []string {
		var out []string
		for _, l := range strings.Split(dot, "\n") {
			if !strings.Contains(l, " at line ") {
				out = append(out, l)
			}
		}
		return out
	}
	if a, b := noLines(a), noLines(graphOf(t, moved)); !slices.Equal(a, b) {
		t.Fatalf("the order of <start>s changed the graph:\n%s\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}
