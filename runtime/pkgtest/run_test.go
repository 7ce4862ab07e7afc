package pkgtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// runFile writes text as a runtime file and runs it with the test components.
func runFile(t *testing.T, text string) (*Verdict, string) {
	t.Helper()
	testutil.Binary(t, "github.com/nicstack/nicstack/components/test_echo")
	bins := filepath.Dir(testutil.Binary(t, "github.com/nicstack/nicstack/components/test_client"))
	path := filepath.Join(t.TempDir(), "test-x.runtime")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var echo testutil.SyncBuffer
	v := Run(context.Background(), path, supervisor.Options{BinDirs: []string{bins}, Components: components.Table, RunDir: filepath.Join(testutil.ReachableTempDir(t), "run")}, &echo)
	return v, echo.String()
}

// TestRunLogPattern: the runtime's init config runs, and the child's exit, logged as
// Genode's init logs it, matches the <succeed> pattern written for Genode.
func TestRunLogPattern(t *testing.T) {
	v, log := runFile(t, runtimeText("+ fail | after_seconds: 30\n+ succeed\n  : [client] received 10 replies\n  : child \"client\" exited with exit value 0\n+ fail | : *Error:"))
	if v.Result != "ok" || v.Reason != "log" {
		t.Errorf("verdict %s\n%s", v, log)
	}
	if !strings.Contains(log, " [client] received 10 replies\n") || !strings.Contains(log, " child \"client\" exited with exit value 0\n") {
		t.Errorf("the echoed log:\n%s", log)
	}
}

// TestRunExitValue: a child with <exit propagate="yes"/> ends the test with its exit value,
// which <succeed exit> expects.
func TestRunExitValue(t *testing.T) {
	text := strings.Replace(runtimeText("+ fail | after_seconds: 30\n+ succeed | exit: 3"), "    + config | count: 10", "    + exit | propagate: yes\n    + config | count: 10 | exit_value: 3", 1)
	if v, log := runFile(t, text); v.Result != "ok" || v.Reason != "exit" {
		t.Errorf("verdict %s\n%s", v, log)
	}
}

// TestRunTimeout: a <succeed> that never matches fails the test when the time is up,
// naming the pattern's place and the line it waited for.
func TestRunTimeout(t *testing.T) {
	v, log := runFile(t, runtimeText("+ fail | after_seconds: 2\n+ succeed | : [client] received 11 replies"))
	if v.Result != "failed" || v.Reason != "timeout 2 sec" || !strings.Contains(v.Detail, `test-x.runtime:5:3 never matched (stuck at "[client] received 11 replies")`) {
		t.Errorf("verdict %s\n%s", v, log)
	}
	if v.Seconds < 2 || v.Seconds > 10 {
		t.Errorf("took %.2f s, want 2", v.Seconds)
	}
}
