package iperf

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nicstack/nicstack/runtime/config"
)

// --affinity runs every point of the matrix once per placement of some starts in the
// scenario's affinity space, so that placements are compared in the same rounds: a value is
// "as-written", or starts with new rectangles, "START=X+W" or "START=X+W,Y+H" (xpos and width,
// then ypos and height; without the second part the start's ypos and height stay),
// separated by spaces. A start left out keeps its <affinity> (as --queues sets it).

// asWritten is the --affinity value of the scenario's own placement.
const asWritten = "as-written"

// placement is one --affinity value: where each named start goes.
type placement struct {
	value  string
	starts []startPlace
}

type startPlace struct {
	name       string
	x, w, y, h int
	hasY       bool
}

// startAffinity is a start the --affinity values move, with its <affinity> as written (nil
// without one), which each run starts from.
type startAffinity struct {
	start    *config.Node
	original *config.Node
}

// parsePlacements checks the --affinity values against the scenario's starts and affinity
// space.
func (sc *scenario) parsePlacements(values []string) ([]placement, error) {
	var out []placement
	for _, v := range values {
		p := placement{value: v}
		if v != asWritten {
			for _, f := range strings.Fields(v) {
				sp, err := sc.parseStartPlace(f)
				if err != nil {
					return nil, fmt.Errorf("--affinity %q: %v", v, err)
				}
				p.starts = append(p.starts, sp)
			}
			if len(p.starts) == 0 {
				return nil, fmt.Errorf("--affinity %q: want %s or START=X+W[,Y+H] ...", v, asWritten)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

func (sc *scenario) parseStartPlace(f string) (startPlace, error) {
	name, rect, ok := strings.Cut(f, "=")
	if !ok {
		return startPlace{}, fmt.Errorf("%q: want START=X+W or START=X+W,Y+H", f)
	}
	st := sc.start(name)
	if st == nil {
		return startPlace{}, fmt.Errorf("%q: the scenario has no <start name=%q>", f, name)
	}
	sp := startPlace{name: name}
	xs, ys, both := strings.Cut(rect, ",")
	var err error
	if sp.x, sp.w, err = span(xs); err != nil {
		return startPlace{}, fmt.Errorf("%q: %v", f, err)
	}
	if both {
		sp.hasY = true
		if sp.y, sp.h, err = span(ys); err != nil {
			return startPlace{}, fmt.Errorf("%q: %v", f, err)
		}
	}
	space := sc.root.Sub("affinity-space")
	if space == nil {
		return startPlace{}, fmt.Errorf("%q: the scenario has no <affinity-space>", f)
	}
	width, err1 := space.Number("width", 1)
	height, err2 := space.Number("height", 1)
	if err1 != nil || err2 != nil {
		return startPlace{}, fmt.Errorf("<affinity-space>: %v", firstErr(err1, err2))
	}
	if sp.x+sp.w > int(width) || sp.y+sp.h > int(height) {
		return startPlace{}, fmt.Errorf("%q lies outside the affinity space %dx%d", f, width, height)
	}
	if _, ok := sc.affinities[name]; !ok {
		var orig *config.Node
		if a := st.Sub("affinity"); a != nil {
			orig = a.Clone()
		}
		if sc.affinities == nil {
			sc.affinities = map[string]startAffinity{}
		}
		sc.affinities[name] = startAffinity{start: st, original: orig}
	}
	return sp, nil
}

// span reads "X+W" (W at least 1).
func span(s string) (pos, size int, err error) {
	p, w, ok := strings.Cut(s, "+")
	pos, err1 := strconv.Atoi(p)
	size, err2 := strconv.Atoi(w)
	if !ok || err1 != nil || err2 != nil || pos < 0 || size < 1 {
		return 0, 0, fmt.Errorf("%q: want POSITION+SIZE, e.g. 0+4", s)
	}
	return pos, size, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// start is the <start> called name, nil without one.
func (sc *scenario) start(name string) *config.Node {
	for _, st := range sc.root.Subs("start") {
		if st.Name() == name {
			return st
		}
	}
	return nil
}

// withDimension is the matrix with each point once per value, set into the point by set: a
// dimension of the matrix (--fq-codel, --bql-limit-max, --affinity).
func withDimension[V any](matrix []setting, values []V, set func(*setting, V)) []setting {
	if len(values) == 0 {
		return matrix
	}
	var out []setting
	for _, m := range matrix {
		for _, v := range values {
			set(&m, v)
			out = append(out, m)
		}
	}
	return out
}

// resetPlacement gives every start an --affinity value moves its <affinity> as written.
func (sc *scenario) resetPlacement() {
	for _, sa := range sc.affinities {
		sa.start.Remove("affinity")
		if sa.original != nil {
			sa.start.Nodes = append(sa.start.Nodes, sa.original.Clone())
		}
	}
}

// patchPlacement gives the starts the --affinity value moves their rectangles.
func (sc *scenario) patchPlacement(value string, places []placement) {
	for _, p := range places {
		if p.value != value {
			continue
		}
		for _, sp := range p.starts {
			st := sc.affinities[sp.name].start
			a := st.Sub("affinity")
			if a == nil {
				a = &config.Node{Type: "affinity", Pos: st.Pos}
				st.Nodes = append(st.Nodes, a)
			}
			a.Set("xpos", strconv.Itoa(sp.x))
			a.Set("width", strconv.Itoa(sp.w))
			if sp.hasY {
				a.Set("ypos", strconv.Itoa(sp.y))
				a.Set("height", strconv.Itoa(sp.h))
			}
		}
	}
}
