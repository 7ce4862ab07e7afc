package bench

import "github.com/nicstack/nicstack/runtime/config"

// SetFQCodel puts <fq-codel/> (its defaults) into every domain of a nic_router's <config>
// (on), or takes every <fq-codel> out (off): the --fq-codel dimension of the benchmarks that
// compare a router with and without its egress scheduler (docs/isolation.md).
func SetFQCodel(cfg *config.Node, on bool) {
	for _, d := range cfg.Subs("domain") {
		d.Remove("fq-codel")
		if on {
			d.Nodes = append(d.Nodes, &config.Node{Type: "fq-codel", Pos: d.Pos})
		}
	}
}
