package component

import (
	"fmt"

	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/config"
)

func parseConfig(name string, cfg *controlpb.Config) (*config.Node, error) {
	origin := cfg.GetOrigin()
	if origin == "" {
		origin = name + " config"
	}
	if cfg.GetText() == "" {
		return &config.Node{Type: "config"}, nil
	}
	n, err := config.Parse(origin, []byte(cfg.GetText()))
	if err != nil || len(cfg.GetPositions()) == 0 {
		return n, err
	}
	positions := cfg.GetPositions()
	if CountPositions(n) != len(positions) {
		return nil, fmt.Errorf("%s: config carries %d positions for %d nodes and attributes", origin, len(positions), CountPositions(n))
	}
	i := 0
	walkPositions(n, func(p *config.Pos) {
		*p = config.Pos{File: origin, Line: int(positions[i].GetLine()), Col: int(positions[i].GetCol())}
		i++
	})
	return n, nil
}

// walkPositions visits the position of every enabled node and attribute in document order:
// a node, its attributes, then its sub-nodes. The supervisor records positions in this order
// before it re-emits a config; the component puts them back after parsing.
func walkPositions(n *config.Node, fn func(*config.Pos)) {
	fn(&n.Pos)
	for i := range n.Attrs {
		fn(&n.Attrs[i].Pos)
	}
	for _, c := range n.Nodes {
		if !c.Disabled {
			walkPositions(c, fn)
		}
	}
}

// Positions lists the positions of a config tree as walkPositions visits them.
func Positions(n *config.Node) []*controlpb.Position {
	var out []*controlpb.Position
	walkPositions(n, func(p *config.Pos) {
		out = append(out, &controlpb.Position{Line: uint32(p.Line), Col: uint32(p.Col)})
	})
	return out
}

// CountPositions is len(Positions(n)).
func CountPositions(n *config.Node) int {
	c := 0
	walkPositions(n, func(*config.Pos) { c++ })
	return c
}
