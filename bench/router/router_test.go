package router

import (
	"testing"

	"github.com/nicstack/nicstack/bench/benchtest"
)

// The bench's scenarios are ones `nicstack check` accepts, the components' validation included.
func TestScenarioChecks(t *testing.T) {
	for _, mode := range Modes {
		benchtest.CheckScenario(t, mode+".xml", Scenario(mode, 64), "nic_router", "nic_perf")
	}
}
