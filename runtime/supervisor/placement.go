package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/nicstack/nicstack/runtime/affinity"
	"github.com/nicstack/nicstack/runtime/config"
)

// Space is an affinity space: width x height. Physically, width counts cores and height
// hardware threads per core, as Genode lays out x86 CPUs.
type Space struct{ Width, Height int }

func (s Space) String() string { return fmt.Sprintf("%dx%d", s.Width, s.Height) }

// Location is a rectangle in an affinity space.
type Location struct {
	X, Y, Width, Height int
	hasX, hasY          bool
	Pos                 config.Pos
}

func (l Location) String() string {
	return fmt.Sprintf("(%d,%d) %dx%d", l.X, l.Y, l.Width, l.Height)
}

// parseLocation reads <affinity xpos ypos width height>. Absent xpos takes the whole row;
// given xpos makes width default to 1; the same for y.
func parseLocation(n *config.Node) (*Location, error) {
	var e errs
	l := &Location{Pos: n.Pos, hasX: n.Has("xpos"), hasY: n.Has("ypos")}
	num := func(name string, def uint64) int {
		v, err := n.Number(name, def)
		e.add(err)
		if v > 1<<16 {
			e.add(config.Errorf(n.Pos, "<affinity %s=%d> is out of range", name, v))
			v = 0
		}
		return int(v)
	}
	l.X, l.Y = num("xpos", 0), num("ypos", 0)
	l.Width, l.Height = num("width", 1), num("height", 1)
	if l.Width == 0 || l.Height == 0 {
		e.add(config.Errorf(n.Pos, "<affinity> width and height must be at least 1"))
	}
	return l, e.err()
}

// In returns the location within space: absent coordinates take the whole row or column.
// It reports false when the location does not fit (Genode warns and ignores it).
func (l *Location) In(space Space) (Location, bool) {
	r := *l
	if !r.hasX {
		r.X, r.Width = 0, space.Width
	}
	if !r.hasY {
		r.Y, r.Height = 0, space.Height
	}
	ok := r.X+r.Width <= space.Width && r.Y+r.Height <= space.Height
	return r, ok
}

// Scale maps a location of virtual space from onto physical space to the way Genode does:
// corners scale proportionally, x1' = x1*Wp/Wv and x2' = x2*Wp/Wv, and the result is at least
// one wide and high.
func (l Location) Scale(from, to Space) Location {
	x1, y1 := l.X*to.Width/from.Width, l.Y*to.Height/from.Height
	x2, y2 := (l.X+l.Width)*to.Width/from.Width, (l.Y+l.Height)*to.Height/from.Height
	return Location{X: x1, Y: y1, Width: max(x2-x1, 1), Height: max(y2-y1, 1), hasX: true, hasY: true}
}

// Topology is the machine's physical affinity space: CPUs[core][thread] are CPU numbers.
type Topology struct {
	CPUs [][]int
}

// Space is cores x the smallest number of hardware threads any core has.
func (t *Topology) Space() Space {
	h := 0
	for i, c := range t.CPUs {
		if i == 0 || len(c) < h {
			h = len(c)
		}
	}
	return Space{len(t.CPUs), h}
}

// Set returns the CPUs of a physical location.
func (t *Topology) Set(l Location) affinity.Set {
	var s affinity.Set
	for x := l.X; x < l.X+l.Width && x < len(t.CPUs); x++ {
		for y := l.Y; y < l.Y+l.Height && y < len(t.CPUs[x]); y++ {
			s = append(s, t.CPUs[x][y])
		}
	}
	sort.Ints(s)
	return s
}

// NewTopology is cores x threads CPUs numbered as Linux numbers hyperthreads: the second
// thread of core c is CPU c+cores. It stands for a machine other than this one (`nicstack
// graph --cpus`, tests).
func NewTopology(cores, threads int) *Topology {
	t := &Topology{}
	for c := range cores {
		var cpus []int
		for h := range threads {
			cpus = append(cpus, c+h*cores)
		}
		t.CPUs = append(t.CPUs, cpus)
	}
	return t
}

// ParseTopology reads a machine as "N" (N cores of one thread each) or "CxT" (C cores of T
// hardware threads, as an affinity space's width x height).
func ParseTopology(s string) (*Topology, error) {
	c, t, both := strings.Cut(s, "x")
	cores, err := strconv.Atoi(c)
	threads := 1
	if err == nil && both {
		threads, err = strconv.Atoi(t)
	}
	if err != nil || cores < 1 || threads < 1 || cores*threads > 1024 {
		return nil, fmt.Errorf("CPUs %q: want N or CORESxTHREADS, 1 to 1024 CPUs in all", s)
	}
	return NewTopology(cores, threads), nil
}

// ReadTopology reads the cores and hardware threads of the CPUs this process may run on, from
// sysfs (CPUs without topology information count as cores of their own).
func ReadTopology() (*Topology, error) {
	allowed, err := affinity.Current()
	if err != nil {
		return nil, err
	}
	type key struct{ pkg, core int }
	cores := map[key][]int{}
	var order []key
	for _, cpu := range allowed {
		dir := fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology", cpu)
		k := key{readInt(filepath.Join(dir, "physical_package_id"), 0), readInt(filepath.Join(dir, "core_id"), -1-cpu)}
		if _, ok := cores[k]; !ok {
			order = append(order, k)
		}
		cores[k] = append(cores[k], cpu)
	}
	sort.Slice(order, func(i, j int) bool { return cores[order[i]][0] < cores[order[j]][0] })
	t := &Topology{}
	for _, k := range order {
		t.CPUs = append(t.CPUs, cores[k])
	}
	if len(t.CPUs) == 0 {
		return nil, fmt.Errorf("no CPUs in this process's affinity mask")
	}
	return t, nil
}

func readInt(path string, def int) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return def
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return def
	}
	return v
}

// Placement is where a start runs.
type Placement struct {
	Virtual  Location
	Physical Location
	CPUs     affinity.Set
	Warning  string // a location outside the space, ignored as Genode does
}

// Place maps a start's affinity onto the machine.
func Place(s *Start, space Space, topo *Topology) Placement {
	var p Placement
	l := &Location{}
	if s.Affinity != nil {
		l = s.Affinity
	}
	v, ok := l.In(space)
	if !ok {
		p.Warning = fmt.Sprintf("%s: affinity %s of %q lies outside the affinity space %s; using the whole space", l.Pos, v, s.Name, space)
		v, _ = (&Location{}).In(space)
	}
	p.Virtual = v
	p.Physical = v.Scale(space, topo.Space())
	p.CPUs = topo.Set(p.Physical)
	return p
}

// ScaleNote says how a scenario's space maps onto this machine when they differ.
func ScaleNote(space Space, topo *Topology) string {
	phys := topo.Space()
	if phys == space {
		return ""
	}
	return fmt.Sprintf("the scenario's affinity space is %s (cores x threads) but this machine has %s; locations are scaled proportionally, so several virtual CPUs may share one", space, phys)
}
