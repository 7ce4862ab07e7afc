package pkgtest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Test is one runtime's criteria evaluated as the depot autopilot does, without processes:
// the run hands it the log lines (Log), the exit value (Exit) and the time (Timeout), and it
// comes to a Verdict.
type Test struct {
	rt       *Runtime
	start    time.Time
	matchers []*matcher // one per criterion
	log      strings.Builder
	lines    []string // the log as the patterns see it, for the verdict
	exit     string   // the exit value, "" while the test runs
	verdict  *Verdict
}

// Verdict is how a test ended, in the words of the depot autopilot's summary.
type Verdict struct {
	File    string  `json:"file"`
	Name    string  `json:"name"`
	Result  string  `json:"result"`           // ok, failed, or invalid (the runtime cannot run)
	Reason  string  `json:"reason"`           // log, exit, timeout N sec (or error: the run broke)
	Detail  string  `json:"detail,omitempty"` // which criterion decided, what never matched
	Seconds float64 `json:"seconds"`
	// Log is the test's log as its patterns saw it.
	Log []string `json:"-"`
}

// String is the verdict as the depot autopilot prints it (name, result, seconds, reason),
// with the detail after it.
func (v *Verdict) String() string {
	s := fmt.Sprintf(" %-31s %-9s %6.2f  %s", v.Name, v.Result, v.Seconds, v.Reason)
	if v.Detail != "" {
		s += ": " + v.Detail
	}
	return s
}

// NewTest starts evaluating rt's criteria at start.
func NewTest(rt *Runtime, start time.Time) *Test {
	t := &Test{rt: rt, start: start}
	for _, c := range rt.Criteria {
		t.matchers = append(t.matchers, &matcher{p: c.Pattern})
	}
	return t
}

// Deadline is when the criterion with after_seconds decides.
func (t *Test) Deadline() time.Time {
	c, _ := t.rt.timeout()
	return t.start.Add(time.Duration(c.AfterSeconds) * time.Second)
}

// Verdict is the outcome, nil while the test runs.
func (t *Test) Verdict() *Verdict { return t.verdict }

// Line renders a log line as the depot autopilot shows it to the patterns: the test's init's
// own lines as they are (child ""), its children's as "[NAME] text".
func Line(child, text string) string {
	if child == "" {
		return text
	}
	return "[" + child + "] " + text
}

// Log takes one log line (Line) and evaluates the criteria.
func (t *Test) Log(line string, now time.Time) {
	if t.verdict != nil {
		return
	}
	t.lines = append(t.lines, line)
	t.log.WriteString("\n" + line)
	log := t.log.String()
	for _, m := range t.matchers {
		m.match(log)
	}
	t.complete(now)
}

// Exit takes the exit value of the test's init (a child's, propagated): criteria naming it
// can now decide; when none names it, the test failed.
func (t *Test) Exit(value int, now time.Time) {
	if t.verdict != nil {
		return
	}
	t.exit = strconv.Itoa(value)
	for _, c := range t.rt.Criteria {
		if c.Exit == t.exit {
			t.complete(now)
			return
		}
	}
	t.finish(false, "exit", fmt.Sprintf("exit value %s, which no criterion expects", t.exit), now)
}

// complete decides by a criterion without after_seconds whose exit value is the test's and
// whose pattern matched; of several at once, the first in the file (the autopilot visits its
// criteria newest first, and the last visited decides).
func (t *Test) complete(now time.Time) {
	for i, c := range t.rt.Criteria {
		if c.AfterSeconds != 0 || c.Exit != t.exit || !t.matchers[i].match(t.log.String()) {
			continue
		}
		reason := "log"
		if t.exit != "" {
			reason = "exit"
		}
		t.finish(c.Succeed, reason, c.String(), now)
		return
	}
}

// Timeout decides by the criterion with after_seconds once its time is up (now is past the
// deadline), naming what did not happen.
func (t *Test) Timeout(now time.Time) {
	if !now.Before(t.Deadline()) {
		t.byTime("", now)
	}
}

// Ended decides, when the run ended by itself and no criterion did, by the criterion with
// after_seconds at once: nothing can change any more.
func (t *Test) Ended(now time.Time) {
	t.byTime("the run ended undecided; ", now)
}

func (t *Test) byTime(why string, now time.Time) {
	if t.verdict != nil {
		return
	}
	c, _ := t.rt.timeout()
	detail := why + c.String()
	for i, s := range t.rt.Criteria {
		if !s.Succeed || s.AfterSeconds != 0 {
			continue
		}
		switch stuck := t.matchers[i].stuck(); {
		case stuck != "":
			detail += fmt.Sprintf("; %s never matched (stuck at %q)", s, stuck)
		case s.Exit != t.exit && s.Exit != "":
			detail += fmt.Sprintf("; %s waits for exit value %s", s, s.Exit)
		}
	}
	t.finish(c.Succeed, fmt.Sprintf("timeout %d sec", c.AfterSeconds), detail, now)
}

// Broken ends the test as failed when the run itself failed (err).
func (t *Test) Broken(err error, now time.Time) {
	if t.verdict == nil {
		t.finish(false, "error", err.Error(), now)
	}
}

func (t *Test) finish(ok bool, reason, detail string, now time.Time) {
	v := &Verdict{File: t.rt.File, Name: t.rt.Name, Result: "failed", Reason: reason, Detail: detail, Seconds: now.Sub(t.start).Seconds(), Log: t.lines}
	if ok {
		v.Result = "ok"
	}
	t.verdict = v
}

// Invalid is the verdict on a runtime file that cannot run (err says why).
func Invalid(file string, err error) *Verdict {
	return &Verdict{File: file, Name: packageName(file), Result: "invalid", Reason: "error", Detail: err.Error()}
}
