// Package pkgtest runs Genode package runtime files as tests, as Genode's depot autopilot
// does: the runtime's init config runs under the supervisor, its <succeed> and <fail>
// criteria are matched against the run's log lines and its exit value, and the one criterion
// with after_seconds decides when time is up. It fetches nothing from a depot: the binaries a
// runtime names are nicstack's components of the same names.
package pkgtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// Runtime is a package's runtime file: <runtime ram caps binary> with <requires>,
// <provides>, <content>, <config> (the init config, which the supervisor reads itself) and
// the criteria.
type Runtime struct {
	File     string
	Name     string // the package's: the folder of a file named "runtime", else the file's name
	Node     *config.Node
	Content  []Rom
	Criteria []*Criterion
}

// Rom is a <rom> of <content>: a file of the package, a binary among them.
type Rom struct {
	Label string
	Pos   config.Pos
}

// Criterion is a <succeed> or <fail>: it decides the test once its pattern matched the log
// and the test's exit value is the one it names (none: the test has not exited), or, with
// after_seconds, once that time is up.
type Criterion struct {
	Succeed      bool
	AfterSeconds uint64
	Exit         string // the exit value it waits for; "" none
	Pattern      *Pattern
	Pos          config.Pos
}

func (c *Criterion) String() string {
	if c.Succeed {
		return fmt.Sprintf("<succeed> at %s", c.Pos)
	}
	return fmt.Sprintf("<fail> at %s", c.Pos)
}

// Schema is what a runtime file may hold, as Genode's depot tools read it
// (depot_deploy/pkg_runtime.hsd); the <config> is init's (supervisor.Schema).
var Schema = func() *config.Schema {
	var services []*config.Schema
	for _, s := range []struct {
		name  string
		attrs []string
	}{
		{"audio_in", nil}, {"audio_out", nil}, {"fs", []string{"name", "writeable"}}, {"file_system", []string{"label", "writeable"}},
		{"framebuffer", nil}, {"input", nil}, {"event", nil}, {"log", nil}, {"nic", []string{"name", "label"}},
		{"uplink", []string{"name", "label"}}, {"block", []string{"name", "label"}}, {"gui", []string{"name", "label"}},
		{"report", []string{"name", "label"}}, {"rom", []string{"name", "label"}}, {"terminal", []string{"name", "label"}},
		{"gpu", nil}, {"usb", nil}, {"timer", nil}, {"pd", nil}, {"cpu", nil}, {"rtc", nil}, {"rm", nil}, {"capture", nil},
		{"play", nil}, {"record", nil}, {"platform", []string{"name", "label"}}, {"pin_state", nil}, {"pin_control", nil},
		{"io_mem", nil}, {"io_port", nil}, {"irq", nil}, {"trace", nil}, {"vm", nil},
	} {
		services = append(services, &config.Schema{Type: s.name, Attrs: s.attrs})
	}
	criterion := []string{"after_seconds", "exit"}
	return &config.Schema{Type: "runtime", Attrs: []string{"ram", "caps", "binary", "config"}, Nodes: []*config.Schema{
		{Type: "requires", Nodes: services},
		{Type: "provides", Nodes: services},
		{Type: "content", Nodes: []*config.Schema{{Type: "rom", Attrs: []string{"name", "label", "as"}}}},
		{Type: "config", Any: true},
		{Type: "succeed", Attrs: criterion, Content: true},
		{Type: "fail", Attrs: criterion, Content: true},
	}}
}()

// IsRuntime reports whether data's top node is a <runtime>.
func IsRuntime(file string, data []byte) bool {
	root, err := config.Parse(file, data)
	return err == nil && root.Type == "runtime"
}

// Load reads a runtime file (Parse).
func Load(file string) (*Runtime, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return Parse(file, data)
}

// Parse reads a runtime file: a node or attribute Schema lacks is an error here, as are
// criteria that cannot be read.
func Parse(file string, data []byte) (*Runtime, error) {
	root, err := config.Parse(file, data)
	if err != nil {
		return nil, err
	}
	rt, errs := parse(file, root)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rt, nil
}

func parse(file string, root *config.Node) (*Runtime, []error) {
	if root.Type != "runtime" {
		return nil, []error{config.Errorf(root.Pos, "top-level node is <%s>, expected <runtime> (a Genode package's runtime file)", root.Type)}
	}
	var errs []error
	for _, e := range config.Check(root, Schema) {
		errs = append(errs, e)
	}
	rt := &Runtime{File: file, Name: packageName(file), Node: root}
	if c := root.Sub("content"); c != nil {
		for _, r := range c.Subs("rom") {
			label := r.String("name", r.String("label", ""))
			if label == "" {
				errs = append(errs, config.Errorf(r.Pos, "<rom> needs a name"))
				continue
			}
			rt.Content = append(rt.Content, Rom{Label: label, Pos: r.Pos})
		}
	}
	for _, n := range root.Children() {
		if n.Type != "succeed" && n.Type != "fail" {
			continue
		}
		c := &Criterion{Succeed: n.Type == "succeed", Exit: n.String("exit", ""), Pattern: NewPattern(n.Content), Pos: n.Pos}
		var err error
		if c.AfterSeconds, err = n.Number("after_seconds", 0); err != nil {
			errs = append(errs, err)
		} else if a, ok := n.Attr("after_seconds"); ok && c.AfterSeconds == 0 {
			errs = append(errs, config.Errorf(a.Pos, "after_seconds must be above 0"))
		}
		rt.Criteria = append(rt.Criteria, c)
	}
	if _, err := rt.timeout(); err != nil {
		errs = append(errs, err)
	}
	return rt, errs
}

// timeout is the one criterion with after_seconds, which the depot autopilot requires.
func (rt *Runtime) timeout() (*Criterion, error) {
	var timed *Criterion
	for _, c := range rt.Criteria {
		if c.AfterSeconds == 0 {
			continue
		}
		if timed != nil {
			return nil, config.Errorf(c.Pos, "a second criterion with after_seconds (the first is %s): the test's time must be unambiguous", timed)
		}
		timed = c
	}
	if timed == nil {
		return nil, config.Errorf(rt.Node.Pos, "no <succeed> or <fail> has after_seconds: the test needs a time limit")
	}
	return timed, nil
}

// packageName is the name a test goes by: Genode keeps a package's runtime in a file named
// "runtime" in the package's folder.
func packageName(file string) string {
	base := filepath.Base(file)
	if base == "runtime" {
		return filepath.Base(filepath.Dir(file))
	}
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// Check validates a runtime file without running it, as `nicstack check` does: its own
// nodes and criteria (Parse), and its init config (supervisor.Check). The notes say what it
// names that nicstack accepts and ignores: <content> files that are no component (the dynamic
// linker, libraries, data), and what supervisor.Ignored lists.
func Check(file string, data []byte, binDirs []string, table component.Table) (problems []error, notes []*config.Error) {
	problems = supervisor.Check(file, data, binDirs, table) // syntax errors included
	root, err := config.Parse(file, data)
	if err != nil {
		return problems, nil
	}
	rt, errs := parse(file, root)
	problems = append(errs, problems...)
	if rt != nil {
		for _, r := range rt.Content {
			if _, err := table.Lookup(r.Label); err != nil && r.Label != "init" {
				notes = append(notes, config.Errorf(r.Pos, "<rom label=%q> of <content> is accepted and ignored: no nicstack component has that name", r.Label))
			}
		}
	}
	return problems, append(notes, supervisor.IgnoredIn(file, data)...)
}
