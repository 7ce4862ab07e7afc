// Package benchtest holds what the benchmarks' tests share: checking a bench's scenario as
// `nicstack check` does. It is for tests only; no benchmark imports it.
package benchtest

import (
	"path/filepath"
	"testing"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// CheckScenario builds the components' binaries and checks that `nicstack check` accepts
// scenario text (named name in its errors), the components' full validation included.
func CheckScenario(t *testing.T, name, text string, binaries ...string) {
	t.Helper()
	var bins string
	for _, c := range binaries {
		bins = filepath.Dir(testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c))
	}
	for _, e := range supervisor.Check(name, []byte(text), []string{bins}, components.Table) {
		t.Error(e)
	}
}
