package pkgtest

import "strings"

// Pattern is the text of a <succeed> or <fail> as Genode's depot autopilot matches it against
// a test's log (since Genode 25.11): each line that is not blank, trimmed of blanks and tabs,
// must match a log line from its start, the pattern's lines in order (other log lines may
// come between); a '*' matches anything, lines included, as little as it can; what follows
// the last fragment of a line is not looked at.
type Pattern struct {
	Lines []string // the pattern's lines that count, trimmed
	frags []fragment
}

// fragment is a piece of a line between '*'s: text to find in the log after the previous
// fragment. A line's first one starts with "\n", which the log has before each line.
type fragment struct {
	text string
	line int // index into Lines
}

// NewPattern reads a criterion's text.
func NewPattern(text string) *Pattern {
	p := &Pattern{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.Trim(line, " \t")
		if line == "" {
			continue
		}
		for i, f := range strings.Split(line, "*") {
			if f == "" {
				continue // a line that starts with '*' matches anywhere in a log line
			}
			if i == 0 {
				f = "\n" + f
			}
			p.frags = append(p.frags, fragment{text: f, line: len(p.Lines)})
		}
		p.Lines = append(p.Lines, line)
	}
	return p
}

// matcher follows one pattern along a growing log.
type matcher struct {
	p    *Pattern
	next int // fragments matched so far
	at   int // where in the log the next fragment may start
}

// match advances over log, which only ever grows, and reports whether the whole pattern has
// matched.
func (m *matcher) match(log string) bool {
	for m.next < len(m.p.frags) {
		f := m.p.frags[m.next].text
		i := strings.Index(log[m.at:], f)
		if i < 0 {
			// Nothing before the last len(f)-1 bytes can start it once more log comes.
			m.at = max(m.at, len(log)-len(f)+1)
			return false
		}
		m.at += i + len(f)
		m.next++
	}
	return true
}

// stuck is the pattern line the matcher waits for, "" when the pattern matched.
func (m *matcher) stuck() string {
	if m.next == len(m.p.frags) {
		return ""
	}
	return m.p.Lines[m.p.frags[m.next].line]
}
