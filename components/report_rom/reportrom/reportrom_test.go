package reportrom

import (
	"testing"

	"github.com/nicstack/nicstack/runtime/config"
)

// The policies of Genode's nic_router_dhcp_managed: a ROM session reads the report its policy
// names; a ROM no policy selects is denied.
func TestROMReadsTheReportItsPolicyNames(t *testing.T) {
	n, err := config.Parse("report_rom.xml", []byte(`<config>
		<policy label="test_manager -> router_state" report="nic_router_2 -> state"/>
		<policy label="nic_router_2 -> config" report="test_manager -> router_config"/>
	</config>`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(n, "report_rom")
	if err != nil {
		t.Fatal(err)
	}
	for rom, want := range map[string]string{
		"test_manager -> router_state": "nic_router_2 -> state",
		"nic_router_2 -> config":       "test_manager -> router_config",
	} {
		if got, ok := cfg.Report(rom); !ok || got != want {
			t.Errorf("ROM %q reads %q (%v), want %q", rom, got, ok, want)
		}
	}
	if got, ok := cfg.Report("other -> config"); ok {
		t.Errorf("ROM without policy reads %q", got)
	}
	bad, _ := config.Parse("report_rom.xml", []byte(`<config> <policy label="x"/> </config>`))
	if _, err := ParseConfig(bad, "report_rom"); err == nil {
		t.Error("a policy without report is accepted")
	}
}
