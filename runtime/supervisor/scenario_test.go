package supervisor

import (
	"strings"
	"testing"
)

// TestStartAttributes: the RAM quota in each of Genode's forms (ram, the old <resource
// name="RAM" quantum>, <default ram>; K, M and G are powers of 1024), the restart policy
// (ours, default from <default restart>), <heartbeat restart_after_skipped> and <exit
// propagate>.
func TestStartAttributes(t *testing.T) {
	sc := mustScenario(t, `<config>
	<default ram="3K" caps="100" restart="yes"/>
	<start name="attr" ram="16M" caps="200"/>
	<start name="old" restart="no"> <resource name="RAM" quantum="2G"/> <resource name="CPU" quantum="10"/> </start>
	<start name="defaulted"> <heartbeat/> </start>
	<start name="watched"> <heartbeat restart_after_skipped="2"/> <exit propagate="yes"/> </start>
</config>`)
	for _, tc := range []struct {
		name              string
		ram               uint64
		restart           bool
		heartbeat         bool
		afterSkipped      uint64
		propagate         bool
		ambiguousResource bool
	}{
		{name: "attr", ram: 16 << 20, restart: true},
		{name: "old", ram: 2 << 30},
		{name: "defaulted", ram: 3 << 10, restart: true, heartbeat: true},
		{name: "watched", ram: 3 << 10, restart: true, heartbeat: true, afterSkipped: 2, propagate: true},
	} {
		st := sc.Start(tc.name)
		if st.RAM != tc.ram || st.Restart != tc.restart || st.Heartbeat != tc.heartbeat || st.RestartAfterSkipped != tc.afterSkipped || st.Propagate != tc.propagate {
			t.Errorf("%s: ram %d restart %v heartbeat %v after %d propagate %v, want %+v", tc.name, st.RAM, st.Restart, st.Heartbeat, st.RestartAfterSkipped, st.Propagate, tc)
		}
	}
	// <default ram> and a <resource name="RAM">: Genode's init warns and takes the resource.
	if len(sc.Warnings) != 1 || !strings.Contains(sc.Warnings[0].Error(), "test.xml:4:35: old: ambiguous RAM quota") {
		t.Errorf("warnings: %v", sc.Warnings)
	}
	// Without <default restart>, a child is not restarted (Genode's init leaves it exited).
	if st := mustScenario(t, `<config><start name="a"/></config>`).Start("a"); st.Restart {
		t.Error("restart is on by default")
	}
	for _, bad := range []struct{ scenario, want string }{
		{`<config><start name="a" caps="many"/></config>`, `test.xml:1:25: attribute "caps" of <start>: "many" is not a number`},
		{`<config><start name="a" restart="always"/></config>`, `test.xml:1:25: attribute "restart" of <start>: "always" is not a boolean`},
		{`<config><start name="a"><resource name="RAM" quantum="1T"/></start></config>`, `test.xml:1:46: attribute "quantum" of <resource>: "1T" is not a number`},
		{`<config><start name="a"><exit propagate="maybe"/></start></config>`, `test.xml:1:31: attribute "propagate" of <exit>: "maybe" is not a boolean`},
	} {
		if _, err := ParseScenario("test.xml", []byte(bad.scenario)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: got %v, want %q", bad.scenario, err, bad.want)
		}
	}
}

// TestRuntimeFile: a Genode package's runtime file runs as the init config in its <config>,
// when its binary is init.
func TestRuntimeFile(t *testing.T) {
	sc, err := ParseScenario("pkg.runtime", []byte("runtime | ram: 32M | caps: 1000 | binary: init\n\n+ fail | after_seconds: 10\n+ config\n  + start a | ram: 1M\n-\n"))
	if err != nil || len(sc.Starts) != 1 || sc.Starts[0].RAM != 1<<20 || sc.Root.Type != "config" {
		t.Fatalf("got %+v %v", sc, err)
	}
	for in, want := range map[string]string{
		"runtime | binary: test-log\n+ config\n-\n":      `pkg.runtime:1:1: <runtime binary="test-log">: nicstack runs the runtime files of packages whose binary is init`,
		"runtime | binary: init | config: x.config\n-\n": `pkg.runtime:1:26: <runtime config="x.config"> names a ROM of the package`,
		"runtime | binary: init\n-\n":                    `pkg.runtime:1:1: <runtime> has no <config>`,
		"start a\n-\n":                                   `pkg.runtime:1:1: top-level node is <start>, expected <config> (or a package's <runtime>)`,
	} {
		if _, err := ParseScenario("pkg.runtime", []byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", in, err, want)
		}
	}
}
