// Package testutil holds the few helpers tests across nicstack share: the rule for tests that
// need root or an external tool (skip with a reason on a developer machine, fail under CI).
package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nicstack/nicstack/runtime/leftover"
)

// InCI reports whether the tests run under CI (CI=true), where a skipped root test is a failure.
func InCI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail skips t with reason, or fails it when running under CI: the one way a test says
// it cannot run here.
func SkipOrFail(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true but this test cannot run: %s", reason)
	}
	t.Skip(reason)
}

// RequireRoot skips t (fails it under CI) unless the test runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(t, "needs root (network namespaces, TAP, AF_PACKET); run make test as root")
	}
}

// RequireCommand skips t (fails it under CI) unless every named program is on PATH.
func RequireCommand(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			SkipOrFail(t, n+" is not installed (make test installs it when root)")
		}
	}
}

var (
	buildMu  sync.Mutex
	buildDir string
	built    = map[string]string{}
)

// Binary builds the main package at pkg (an import path such as
// "github.com/nicstack/nicstack/components/nic_router") once per test process and returns the
// path of the executable. Tests that launch real component processes use it, so that
// `go test ./...` needs no prior `make build`.
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	if buildDir == "" {
		sweepBinDirs()
		d := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", binDirPrefix, os.Getpid()))
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		buildDir = d
	}
	out := filepath.Join(buildDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, b)
	}
	built[pkg] = out
	return out
}

// binDirPrefix names the per-process folders Binary builds into; the suffix is the test
// process's pid, so a later test process can remove the folders of finished ones (a test
// binary has no hook that runs after its last test).
const binDirPrefix = "nicstack-testbin-"

func sweepBinDirs() {
	for _, d := range leftover.Orphans(os.TempDir(), binDirPrefix) {
		os.RemoveAll(d)
	}
}

// BinDir returns the folder Binary builds into (creating it), for tests that run a supervisor
// which looks for component binaries next to each other.
func BinDir(t testing.TB) string {
	t.Helper()
	Binary(t, "github.com/nicstack/nicstack/cmd/nicstack")
	return buildDir
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers: tests hand it to a supervisor as the
// log output of every component and read it while they run.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Stops calls stop and fails t unless it returns within 5 s and, afterwards, at most before
// goroutines run (runtime.NumGoroutine taken before what stop is to end was started; -1:
// only the return is checked). It is the check of a handler's Stop.
func Stops(t testing.TB, stop func(), before int) {
	t.Helper()
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return within 5 s")
	}
	if before < 0 {
		return
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after Stop, want at most %d", runtime.NumGoroutine(), before)
		}
	}
}

// ReachableTempDir is a t.TempDir that every user may pass through (not list): a run as root
// starts components as their own users (supervisor.Options.RunAs), and they must reach their
// folders in the run folder made inside it.
func ReachableTempDir(t testing.TB) string {
	d := t.TempDir()
	for p := d; p != filepath.Dir(p); p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			os.Chmod(p, fi.Mode().Perm()|0o011)
		}
	}
	return d
}
