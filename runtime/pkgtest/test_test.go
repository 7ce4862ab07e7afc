package pkgtest

import (
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components"
)

// runtimeText is a runtime file in HID as Genode writes them since 26.02, with the given
// criteria.
func runtimeText(criteria string) string {
	return `runtime | ram: 32M | caps: 1000 | binary: init

+ requires | + timer
` + criteria + `
+ content
  + rom | label: ld.lib.so
  + rom | label: test_echo
  + rom | label: test_client

+ config
  + parent-provides
    + service ROM
    + service LOG
  + default-route
    + any-service
      + parent
      + any-child
  + default | caps: 100
  + start echo | ram: 1M
    + binary test_echo
    + provides | + service Nic
  + start client | ram: 1M
    + binary test_client
    + config | count: 10
-
`
}

func mustRuntime(t *testing.T, criteria string) *Runtime {
	t.Helper()
	rt, err := Parse("pkg/test-x/runtime", []byte(runtimeText(criteria)))
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestVerdicts: the criteria decide as the depot autopilot's do.
func TestVerdicts(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	exited := `child "client" exited with exit value 0`
	for _, tc := range []struct {
		name, criteria string
		lines          []string
		exit           *int
		end            time.Time // Timeout then
		result, reason string
		detail         string
	}{
		{name: "log", criteria: "+ fail | after_seconds: 10\n+ succeed | : " + exited,
			lines: []string{"[client] received 10 replies", exited}, result: "ok", reason: "log", detail: "<succeed> at pkg/test-x/runtime:5:3"},
		{name: "fail pattern", criteria: "+ fail | after_seconds: 10\n+ succeed | : " + exited + "\n+ fail | : *Error:",
			lines: []string{"[echo] Error: lost"}, result: "failed", reason: "log", detail: "<fail> at pkg/test-x/runtime:6:3"},
		{name: "multi-line in order", criteria: "+ fail | after_seconds: 10\n+ succeed\n  : [client] link up*\n  : " + exited,
			lines: []string{exited, "[client] link up session=1"}, end: at(10), result: "failed", reason: "timeout 10 sec",
			detail: `<fail> at pkg/test-x/runtime:4:3; <succeed> at pkg/test-x/runtime:5:3 never matched (stuck at "child \"client\" exited with exit value 0")`},
		{name: "exit", criteria: "+ fail | after_seconds: 10\n+ succeed | exit: 0\n+ fail | exit: -1",
			exit: new(int), result: "ok", reason: "exit", detail: "<succeed> at pkg/test-x/runtime:5:3"},
		{name: "unexpected exit", criteria: "+ fail | after_seconds: 10\n+ succeed | exit: 1",
			exit: new(int), result: "failed", reason: "exit", detail: "exit value 0, which no criterion expects"},
		{name: "log criteria end with an exit", criteria: "+ fail | after_seconds: 10\n+ succeed | : never\n+ succeed | exit: 0",
			lines: []string{"never"}, exit: new(int), result: "ok", reason: "log"},
		{name: "the first in the file decides", criteria: "+ fail | after_seconds: 10\n+ fail | : [echo] *\n+ succeed | : [echo] ready",
			lines: []string{"[echo] ready"}, result: "failed", reason: "log", detail: "<fail> at pkg/test-x/runtime:5:3"},
		{name: "succeed in time", criteria: "+ succeed | after_seconds: 3\n+ fail | : *Error:",
			lines: []string{"[echo] Warning: slow"}, end: at(3), result: "ok", reason: "timeout 3 sec", detail: "<succeed> at pkg/test-x/runtime:4:3"},
	} {
		rt := mustRuntime(t, tc.criteria)
		test := NewTest(rt, t0)
		for i, l := range tc.lines {
			test.Log(l, at(float64(i+1)))
		}
		if tc.exit != nil {
			test.Exit(*tc.exit, at(5))
		}
		if !tc.end.IsZero() {
			test.Timeout(tc.end.Add(-time.Millisecond))
			if test.Verdict() != nil && tc.reason != "log" {
				t.Errorf("%s: decided before the deadline", tc.name)
			}
			test.Timeout(tc.end)
		}
		v := test.Verdict()
		if v == nil {
			t.Errorf("%s: no verdict", tc.name)
			continue
		}
		if v.Result != tc.result || v.Reason != tc.reason || tc.detail != "" && v.Detail != tc.detail {
			t.Errorf("%s: got %s, want %s %s: %s", tc.name, v, tc.result, tc.reason, tc.detail)
		}
		if v.Name != "test-x" {
			t.Errorf("%s: the test is called %q, want the package's name", tc.name, v.Name)
		}
	}
}

func TestVerdictLine(t *testing.T) {
	v := &Verdict{Name: "test-x", Result: "failed", Reason: "timeout 10 sec", Detail: "<fail> at f:1:1", Seconds: 10.004}
	if got, want := v.String(), " test-x                          failed     10.00  timeout 10 sec: <fail> at f:1:1"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestRuntimeErrors: a runtime file that cannot run names the place.
func TestRuntimeErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{runtimeText("+ fail\n+ succeed | : x"), "pkg/test-x/runtime:1:1: no <succeed> or <fail> has after_seconds: the test needs a time limit"},
		{runtimeText("+ fail | after_seconds: 5\n+ succeed | after_seconds: 9"), "pkg/test-x/runtime:5:3: a second criterion with after_seconds (the first is <fail> at pkg/test-x/runtime:4:3)"},
		{runtimeText("+ fail | after_seconds: 0"), "pkg/test-x/runtime:4:10: after_seconds must be above 0"},
		{runtimeText("+ fail | after_seconds: 5\n+ sucess | : x"), `pkg/test-x/runtime:5:3: unknown node <sucess> in <runtime>`},
		{runtimeText("+ fail | after_seconds: 5\n+ content | + rom"), `pkg/test-x/runtime:5:15: <rom> needs a name`},
		{"config\n-\n", "pkg/test-x/runtime:1:1: top-level node is <config>, expected <runtime>"},
	} {
		if _, err := Parse("pkg/test-x/runtime", []byte(tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

// TestCheckRuntime: check reads the runtime's own nodes and its init config, and notes the
// content that is no component and the init config's ignored parts.
func TestCheckRuntime(t *testing.T) {
	problems, notes := Check("pkg/test-x/runtime", []byte(runtimeText("+ fail | after_seconds: 5")), nil, components.Table)
	if len(problems) != 0 {
		t.Errorf("problems: %v", problems)
	}
	var got []string
	for _, n := range notes {
		got = append(got, n.Error())
	}
	for _, want := range []string{
		`pkg/test-x/runtime:6:5: <rom label="ld.lib.so"> of <content> is accepted and ignored: no nicstack component has that name`,
		`pkg/test-x/runtime:12:7: <service name="ROM"> of <parent-provides> is accepted and ignored`,
		`pkg/test-x/runtime:18:15: caps="100" of <default> is accepted and ignored`,
	} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("notes lack %q:\n%s", want, strings.Join(got, "\n"))
		}
	}
	problems, _ = Check("pkg/test-x/runtime", []byte(strings.Replace(runtimeText("+ fail | after_seconds: 5"), "binary test_client", "binary nic_drv", 1)), nil, components.Table)
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), `pkg/test-x/runtime:23:7: binary of "client": "nic_drv" is not a nicstack component`) {
		t.Errorf("a binary nicstack lacks: %v", problems)
	}
}
