package supervisor

import (
	"errors"
	"strings"
	"testing"
)

func mustScenario(t *testing.T, xml string) *Scenario {
	t.Helper()
	sc, err := ParseScenario("test.xml", []byte(xml))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

const routingScenario = `<config>
	<parent-provides> <service name="LOG"/> </parent-provides>
	<default-route> <any-service> <parent/> <any-child/> </any-service> </default-route>
	<start name="a"> <provides> <service name="Nic"/> <service name="Uplink"/> </provides> </start>
	<start name="b"> <provides> <service name="Nic"/> </provides> </start>
	<start name="client">
		<route>
			<service name="Nic" label_prefix="vm"> <child name="b" label="rewritten"/> </service>
			<service name="Nic" label_suffix="-a"> <child name="a"/> </service>
			<service name="Nic" label_last="last"> <child name="b"/> </service>
			<service name="Nic" label_prefix="both" label_suffix="-z"> <child name="b"/> </service>
			<service name="Nic" unscoped_label="client -> whole" label="ignored"> <child name="b" label="unscoped"/> </service>
			<service name="Nic" label_last=""> <child name="b" label="empty last"/> </service>
			<service name="Nic"> <child name="a"/> <child name="b"/> </service>
			<service name="LOG"> <parent/> </service>
		</route>
	</start>
	<start name="plain"/>
</config>`

func TestResolve(t *testing.T) {
	sc := mustScenario(t, routingScenario)
	client, plain := sc.Start("client"), sc.Start("plain")
	for _, tc := range []struct {
		who            *Start
		service, label string
		server, seen   string
		parent         bool
		denied         string
	}{
		{who: client, service: "Nic", label: "vm1", server: "b", seen: "rewritten"},     // first match, rewrite
		{who: client, service: "Nic", label: "x-a", server: "a", seen: "client -> x-a"}, // suffix
		{who: client, service: "Nic", label: "p -> last", server: "b", seen: "client -> p -> last"},
		{who: client, service: "Nic", label: "both-z", server: "b", seen: "client -> both-z"}, // prefix and suffix
		{who: client, service: "Nic", label: "both-y", server: "a", seen: "client -> both-y"}, // the suffix fails
		{who: client, service: "Nic", label: "whole", server: "b", seen: "unscoped"},          // the whole label decides
		{who: client, service: "Nic", label: "", server: "b", seen: "empty last"},             // "client -> " ends in ""
		{who: client, service: "Nic", label: "p", server: "a", seen: "client -> p"},           // catch-all, first target
		{who: client, service: "LOG", label: "", parent: true, seen: "client -> "},
		{who: client, service: "Uplink", label: "", denied: "no rule matches"},     // own route: no default-route
		{who: plain, service: "Uplink", label: "", server: "a", seen: "plain -> "}, // default-route, unique provider
		{who: plain, service: "Nic", label: "", denied: "ambiguous"},               // two providers
		{who: plain, service: "Timer", label: "", denied: "no target"},
	} {
		d, err := sc.Resolve(tc.who, tc.service, tc.label)
		if tc.denied != "" {
			var de *DeniedError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.denied) {
				t.Errorf("%s %s %q: got %v, want denial %q", tc.who.Name, tc.service, tc.label, err, tc.denied)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s %q: %v", tc.who.Name, tc.service, tc.label, err)
			continue
		}
		if d.Server != tc.server || d.Parent != tc.parent || d.Label != tc.seen {
			t.Errorf("%s %s %q: got server %q parent %v label %q, want %q %v %q", tc.who.Name, tc.service, tc.label, d.Server, d.Parent, d.Label, tc.server, tc.parent, tc.seen)
		}
	}
}

func TestDenialCarriesTrace(t *testing.T) {
	sc := mustScenario(t, routingScenario)
	_, err := sc.Resolve(sc.Start("plain"), "Nic", "x")
	want := []string{
		`session Nic "x" of "plain" denied: <any-child/> is ambiguous`,
		`default-route: <any-service> -> <parent/> at test.xml:3:33: the parent does not provide Nic`,
		`default-route: <any-service> -> <any-child/> at test.xml:3:43: ambiguous, provided by a, b`,
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("denial %v\nlacks %q", err, w)
		}
	}
}
