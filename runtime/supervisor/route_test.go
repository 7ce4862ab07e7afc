package supervisor

import (
	"errors"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/runtime/packetstream"
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
		{who: client, service: "Uplink", label: "", denied: "no rule matches"},         // own route: no default-route
		{who: plain, service: "Uplink", label: "", server: "a", seen: "plain -> "},     // default-route, unique provider
		{who: plain, service: "Nic", label: "", denied: "ambiguous, provided by a, b"}, // two providers: the next target, then the next rule
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
		`session Nic "x" of "plain" denied: no target of a matching <any-service> rule can serve it, nor a later rule`,
		`default-route: <any-service> -> <parent/> at test.xml:3:33: the parent does not provide Nic`,
		`default-route: <any-service> -> <any-child/> at test.xml:3:43: ambiguous, provided by a, b`,
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("denial %v\nlacks %q", err, w)
		}
	}
}

// TestRuleFallThrough pins how Genode's init (sandbox's route model) goes on when the
// targets of a matching rule cannot serve: the next target of the rule, then, for
// <any-service> only, the next rule; a <service> rule whose targets all fail denies.
func TestRuleFallThrough(t *testing.T) {
	sc := mustScenario(t, `<config>
	<parent-provides> <service name="LOG"/> </parent-provides>
	<start name="a"> <provides> <service name="Nic"/> </provides> </start>
	<start name="b"> <provides> <service name="Nic"/> <service name="Uplink"/> </provides> </start>
	<start name="c"> <provides> <service name="Nic"/> </provides> </start>
	<start name="svc">
		<route>
			<service name="Nic"> <parent/> <child name="ghost"/> <any-child/> </service>
			<any-service> <child name="a"/> </any-service>
		</route>
	</start>
	<start name="svc2">
		<route>
			<service name="Nic"> <parent/> <child name="b"/> </service>
			<any-service> <child name="a"/> </any-service>
		</route>
	</start>
	<start name="any">
		<route>
			<any-service> <parent/> <child name="a"/> </any-service>
			<any-service> <any-child/> <child name="b"/> </any-service>
		</route>
	</start>
</config>`)
	for _, tc := range []struct {
		client, service, server string
		parent                  bool
		denied                  string
	}{
		// Every target of the matching <service> rule fails (the parent lacks Nic, ghost is
		// no child, <any-child/> finds three): denied, the <any-service> below is not tried.
		{client: "svc", service: "Nic", denied: "no target of the first matching <service> rule can serve it"},
		{client: "svc", service: "Uplink", server: "a", denied: `"a" does not provide Uplink`}, // <any-service>: a lacks Uplink, no rule left
		{client: "svc2", service: "Nic", server: "b"},                                          // the rule's second target
		{client: "any", service: "LOG", parent: true},
		{client: "any", service: "Nic", server: "a"},    // the first <any-service>'s second target
		{client: "any", service: "Uplink", server: "b"}, // first rule fails: the next rule, <any-child/> is unique
	} {
		d, err := sc.Resolve(sc.Start(tc.client), tc.service, "")
		switch {
		case tc.denied != "" && (err == nil || !strings.Contains(err.Error(), tc.denied)):
			t.Errorf("%s %s: got %+v %v, want a denial with %q", tc.client, tc.service, d, err, tc.denied)
		case tc.denied == "" && err != nil:
			t.Errorf("%s %s: %v", tc.client, tc.service, err)
		case tc.denied == "" && (d.Server != tc.server || d.Parent != tc.parent):
			t.Errorf("%s %s: got server %q parent %v, want %q %v", tc.client, tc.service, d.Server, d.Parent, tc.server, tc.parent)
		}
	}
}

// TestAlias: a route's <child name/> may name an <alias>, which sends the session to the
// alias's child; the label stays the client's.
func TestAlias(t *testing.T) {
	sc := mustScenario(t, `<config>
	<alias name="uplink" child="drv"/>
	<alias name="gone" child="nobody"/>
	<start name="drv"> <provides> <service name="Uplink"/> </provides> </start>
	<start name="client">
		<route>
			<service name="Uplink" label="x"> <child name="gone"/> </service>
			<service name="Uplink"> <child name="uplink"/> </service>
		</route>
	</start>
</config>`)
	client := sc.Start("client")
	d, err := sc.Resolve(client, "Uplink", "")
	if err != nil || d.Server != "drv" || d.Label != "client -> " {
		t.Errorf("through the alias: %+v %v, want drv with label %q", d, err, "client -> ")
	}
	if _, err := sc.Resolve(client, "Uplink", "x"); err == nil || !strings.Contains(err.Error(), `<child name="gone"/> at test.xml:7:39: no such child`) {
		t.Errorf("an alias of a missing child: %v", err)
	}
	for _, bad := range []struct{ scenario, want string }{
		{`<config><start name="a"/><alias name="a" child="a"/></config>`, `test.xml:1:27: <alias name="a"> clashes with the <start> of that name at test.xml:1:10`},
		{`<config><start name="a"/><alias name="b" child="a"/><alias name="b" child="a"/></config>`, `test.xml:1:54: <alias name="b"> is a duplicate of the one at test.xml:1:27`},
		{`<config><alias name="b"/></config>`, `test.xml:1:10: <alias name="b"> needs a child`},
	} {
		if _, err := ParseScenario("test.xml", []byte(bad.scenario)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: got %v, want %q", bad.scenario, err, bad.want)
		}
	}
}

// tx_queue_bytes and rx_queue_bytes on a route's target bound the bytes in flight of the
// session's sources; without them the client's is 10 ms at 1 Gbit/s (its buffer when smaller)
// and the server's none; a bad value is refused at its file:line.
func TestQueueBounds(t *testing.T) {
	sc := mustScenario(t, `<config>
	<parent-provides> <service name="LOG"/> </parent-provides>
	<start name="r"> <provides> <service name="Nic"/> </provides> </start>
	<start name="vm">
		<route>
			<service name="Nic" label="small"> <child name="r" tx_queue_bytes="64K" rx_queue_bytes="100000"/> </service>
			<service name="Nic" label="none"> <child name="r" tx_queue_bytes="0"/> </service>
			<service name="Nic"> <child name="r"/> </service>
		</route>
	</start>
</config>`)
	genode := packetstream.DefaultConfig()
	small := packetstream.Config{QueueSize: 64, BulkSize: 64 * packetstream.BlockSize}
	for _, tc := range []struct {
		label  string
		cfg    packetstream.Config
		tx, rx int
	}{
		{"small", genode, 64 << 10, 100000},
		{"none", genode, 0, 0},
		{"other", genode, 1250000, 0},
		{"other", small, 64 * packetstream.BlockSize, 0},
	} {
		d, err := sc.Resolve(sc.Start("vm"), "Nic", tc.label)
		if err != nil {
			t.Fatal(err)
		}
		if tx, rx := QueueBounds(d.Target, tc.cfg); tx != tc.tx || rx != tc.rx {
			t.Errorf("%s, buffer %d: tx %d rx %d, want %d %d", tc.label, tc.cfg.BulkSize, tx, rx, tc.tx, tc.rx)
		}
	}
	for _, bad := range []struct{ attr, want string }{
		{`tx_queue_bytes="lots"`, `test.xml:4:`},
		{`rx_queue_bytes="3G"`, `test.xml:4:`},
	} {
		_, err := ParseScenario("test.xml", []byte(`<config>
	<parent-provides> <service name="LOG"/> </parent-provides>
	<start name="r"> <provides> <service name="Nic"/> </provides> </start>
	<start name="vm"> <route> <service name="Nic"> <child name="r" `+bad.attr+`/> </service> </route> </start>
</config>`))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error at %s", bad.attr, err, bad.want)
		}
	}
}
