// Package dynamicrom is Genode's dynamic_rom server without its sessions: ROM modules whose
// content follows a timeline in the config (<inline> content, <sleep milliseconds>, <empty/>),
// restarting at its end, one timeline per ROM session from the moment it opens. It exists to
// test components that follow changes of their config; the component serves the sessions.
package dynamicrom

import (
	"fmt"
	"time"

	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/label"
)

// Schema is dynamic_rom's <config>, as Genode's reads it.
var Schema = &config.Schema{Type: "config", Attrs: []string{"verbose"}, Nodes: []*config.Schema{
	{Type: "rom", Attrs: []string{"name"}, Nodes: []*config.Schema{
		{Type: "inline", Attrs: []string{"description"}, Any: true},
		{Type: "sleep", Attrs: []string{"milliseconds"}},
		{Type: "empty"},
	}},
}}

// Config is the ROM modules one dynamic_rom serves.
type Config struct {
	Verbose bool // log each step, as Genode's verbose="yes"
	Roms    []*Rom
}

// Rom is one <rom>: its name and timeline.
type Rom struct {
	Name  string
	Steps []Step
}

// Step is one node of a timeline: new content (Content set), a removal (Empty) or a sleep.
type Step struct {
	Content     []byte // the <inline>'s one node
	Description string // of an <inline>
	Empty       bool
	Sleep       time.Duration
}

// ParseConfig reads dynamic_rom's <config>. A timeline Genode's would spin through without
// end (no <sleep>) or that has no step is refused, as is an <inline> without exactly one node
// (Genode's warns and serves nothing). start is unused.
func ParseConfig(n *config.Node, start string) (cfg Config, err error) {
	if cfg.Verbose, err = n.Bool("verbose", false); err != nil {
		return cfg, err
	}
	for _, r := range n.Subs("rom") {
		rom := &Rom{Name: r.Name()}
		if rom.Name == "" {
			return cfg, config.Errorf(r.Pos, "<rom> needs a name")
		}
		sleeps := false
		for _, s := range r.Children() {
			var step Step
			switch s.Type {
			case "inline":
				if len(s.Nodes) != 1 {
					return cfg, config.Errorf(s.Pos, "<inline> of <rom name=%q> holds %d nodes, want exactly one (the module's content)", rom.Name, len(s.Nodes))
				}
				step.Content, step.Description = s.Nodes[0].XML(), s.String("description", "")
			case "sleep":
				ms, err := s.Number("milliseconds", 0)
				if err != nil {
					return cfg, err
				}
				if ms == 0 {
					return cfg, config.Errorf(s.Pos, "<sleep> of <rom name=%q> needs milliseconds above 0", rom.Name)
				}
				step.Sleep, sleeps = time.Duration(ms)*time.Millisecond, true
			case "empty":
				step.Empty = true
			default:
				continue // reported by the schema check
			}
			rom.Steps = append(rom.Steps, step)
		}
		if !sleeps {
			return cfg, config.Errorf(r.Pos, "<rom name=%q> has no <sleep>: its timeline would change without end", rom.Name)
		}
		cfg.Roms = append(cfg.Roms, rom)
	}
	return cfg, nil
}

// Lookup is the module a ROM session labelled l gets: the <rom> named as the label's last
// element, as Genode's dynamic_rom picks it; nil when there is none (the session is denied).
func (c Config) Lookup(l string) *Rom {
	name := label.Last(l)
	for _, r := range c.Roms {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Timeline is where one session is in its module's timeline.
type Timeline struct {
	rom  *Rom
	next int
}

// NewTimeline starts at rom's first step.
func NewTimeline(rom *Rom) *Timeline { return &Timeline{rom: rom} }

// Run executes the steps up to and including the next <sleep>, as Genode's does at session
// creation and after each sleep: each <inline> and <empty> goes to change (content nil for
// <empty>), each step's log line to log (verbose), and Run returns how long to sleep.
func (t *Timeline) Run(change func(content []byte), log func(string)) time.Duration {
	for {
		s := t.rom.Steps[t.next]
		t.next = (t.next + 1) % len(t.rom.Steps)
		switch {
		case s.Content != nil:
			change(s.Content)
			if s.Description != "" {
				log(fmt.Sprintf("%s: change (%s)", t.rom.Name, s.Description))
			} else {
				log(t.rom.Name + ": change")
			}
		case s.Empty:
			change(nil)
			log(t.rom.Name + ": remove")
		default:
			log(fmt.Sprintf("%s: sleep %d milliseconds", t.rom.Name, s.Sleep.Milliseconds()))
			return s.Sleep
		}
	}
}
