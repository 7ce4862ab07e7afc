// Package reportrom is Genode's report_rom server without its sessions: it keeps the last
// report each Report session sent, by the session's label, and says which report a ROM
// session reads (the <policy report> that selects its label). It stores no file: a report
// lives as long as the server.
package reportrom

import (
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/label"
)

// Schema is report_rom's <config>, as Genode's reads it.
var Schema = &config.Schema{Type: "config", Attrs: []string{"verbose"}, Nodes: []*config.Schema{
	{Type: "policy", Attrs: []string{"label", "label_prefix", "label_suffix", "report"}},
	{Type: "default-policy", Attrs: []string{"report"}},
}}

// Config is one report_rom's policies.
type Config struct {
	Verbose bool // log each report's label, as Genode's verbose="yes"
	node    *config.Node
}

// ParseConfig reads report_rom's <config>: every policy names the report it serves. start
// is unused.
func ParseConfig(n *config.Node, start string) (cfg Config, err error) {
	if cfg.Verbose, err = n.Bool("verbose", false); err != nil {
		return cfg, err
	}
	for _, p := range append(n.Subs("policy"), n.Subs("default-policy")...) {
		if !p.Has("report") {
			return cfg, config.Errorf(p.Pos, "<%s> needs report, the label of the report it serves", p.Type)
		}
	}
	cfg.node = n
	return cfg, nil
}

// Report is the label of the report a ROM session labelled rom reads, by the policy that
// selects it (Genode's Session_policy); false when none does (the session is denied).
func (c Config) Report(rom string) (string, bool) {
	if c.node == nil {
		return "", false
	}
	p := label.Policy(c.node, rom)
	if p == nil {
		return "", false
	}
	return p.String("report", ""), true
}
