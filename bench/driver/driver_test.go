package driver

import (
	"testing"

	"github.com/nicstack/nicstack/bench/benchtest"
)

// The bench's scenario is one `nicstack check` accepts, the NIC components' validation included.
func TestScenarioChecks(t *testing.T) {
	benchtest.CheckScenario(t, "bench.xml", Scenario(651, true, 0), "ipxe_nic", "intel_nic_hw", "nic_perf")
}
