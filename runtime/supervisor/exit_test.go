package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/testutil"
)

const exitScenario = `<config>
	<start name="echo"> <binary name="test_echo"/> <provides> <service name="Nic"/> </provides> </start>
	<start name="client"> <binary name="test_client"/>
		<route> <service name="Nic"> <child name="echo"/> </service> </route>
		<config count="20" exit_value="-3" interval_us="200"/>
	</start>
</config>`

// TestChildExit: a component that exits with a value is logged as Genode's init logs it
// (the value whole, negative too), its sessions close, and it stays exited: no restart, the
// status and the state report show the value.
func TestChildExit(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	r := startRun(t, exitScenario, func(o *Options) { o.Out = NewGenodeOutput(logs, nil) })
	r.waitFor("the client's exit", 20*time.Second, func() bool { return r.component("client").State == "exited" })
	time.Sleep(20 * r.s.opts.MinBackoff) // a restart would have come by now
	c := r.component("client")
	if c.ExitCode != -3 || c.Restarts != 0 || c.Pid != 0 || c.State != "exited" {
		t.Errorf("client after its exit: %+v", c)
	}
	r.waitFor("the echo's session closed", 10*time.Second, func() bool { return len(r.component("echo").Sessions) == 0 })
	text := logs.String()
	for _, want := range []string{"[init -> client] received 20 replies\n", "[init] child \"client\" exited with exit value -3\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("the log lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "exited with exit value") != 1 {
		t.Errorf("more than one exit:\n%s", text)
	}
	if report := string(Report(r.status(), nil).XML()); !strings.Contains(report, `state="exited"`) || !strings.Contains(report, `exited="-3"`) {
		t.Errorf("the state report does not show the exit:\n%s", report)
	}
	// A new version starts it again, as in Genode's init; another change does not.
	r.rewrite(`<start name="client">`, `<start name="client" ram="1M">`)
	time.Sleep(100 * time.Millisecond)
	if c := r.component("client"); c.State != "exited" {
		t.Errorf("a changed <start> restarted the exited client: %+v", c)
	}
	r.rewrite(`<start name="client" ram="1M">`, `<start name="client" ram="1M" version="2">`)
	r.waitFor("the new version's exit", 20*time.Second, func() bool {
		return strings.Count(logs.String(), "exited with exit value -3") == 2
	})
}

// TestExitPropagate: with <exit propagate="yes"/> the child's exit ends the run, which
// returns the value; init does not log the child's exit as a plain one.
func TestExitPropagate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.xml")
	os.WriteFile(path, []byte(strings.Replace(exitScenario, `<config count=`, `<exit propagate="yes"/> <config count=`, 1)), 0o644)
	logs := &testutil.SyncBuffer{}
	s, err := New(path, Options{BinDirs: []string{testBinDir(t)}, Components: components.Table, Out: NewGenodeOutput(logs, nil), RunDir: filepath.Join(testutil.ReachableTempDir(t), "run")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = s.Run(ctx)
	var exit *PropagatedExit
	if !errors.As(err, &exit) || exit.Child != "client" || exit.ExitStatus() != -3 {
		t.Fatalf("Run returned %v, want the client's exit value -3\n%s", err, logs.String())
	}
	text := logs.String()
	if strings.Contains(text, `child "client" exited with exit value`) || !strings.Contains(text, `[init] exit value -3 of child "client" propagated`) {
		t.Errorf("log:\n%s", text)
	}
}

// TestFailedLaunch: a binary that cannot be launched stays failed (no restart="yes"), and
// is tried again when the scenario changes.
func TestFailedLaunch(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "broken"), []byte("#!/bin/sh\necho broken on purpose >&2\nexit 3\n"), 0o755)
	r := startRun(t, `<config><start name="broken"/></config>`, func(o *Options) { o.BinDirs = append(o.BinDirs, dir) })
	r.waitFor("the failure", 20*time.Second, func() bool { return r.component("broken").State == "failed" })
	time.Sleep(20 * r.s.opts.MinBackoff)
	if n := strings.Count(r.logs.String(), "broken on purpose"); n != 1 {
		t.Errorf("launched %d times, want once", n)
	}
	r.rewrite(`<start name="broken"/>`, `<start name="broken"/><start name="other"><binary name="test_echo"/></start>`)
	r.waitFor("the second try", 20*time.Second, func() bool { return strings.Count(r.logs.String(), "broken on purpose") == 2 })
}
