package pkgtest

import (
	"strings"
	"testing"
)

// logOf is a log as the depot autopilot keeps it: each line after a newline.
func logOf(lines ...string) string { return "\n" + strings.Join(lines, "\n") }

// TestPattern pins Genode's log matching (depot_autopilot's log matcher since 25.11): pattern
// lines are trimmed and match log lines from their start, in order, others may come between;
// '*' matches anything, across lines too; blank pattern lines do not count.
func TestPattern(t *testing.T) {
	log := logOf(
		"[client] link up session=1",
		"[init -> x] noise",
		"[client] received 20 replies",
		`child "client" exited with exit value 0`,
	)
	for _, tc := range []struct {
		pattern string
		match   bool
	}{
		{`child "client" exited with exit value 0`, true},
		{"\t  [client] link up\n\n   [client] received 20 replies  \n", true}, // trimmed, in order, a line between
		{"[client] received 20 replies\n[client] link up", false},             // out of order
		{"client] link up", false},                                            // a line matches from its start
		{"*client] link up", true},                                            // unless it starts with '*'
		{"[client] link*20 replies", true},                                    // '*' spans lines
		{"[client] * replies", true},
		{"[client] *sent", false},
		{`child "client" exited with exit value 1`, false},
		{"", true}, // nothing to wait for
	} {
		m := &matcher{p: NewPattern(tc.pattern)}
		if got := m.match(log); got != tc.match {
			t.Errorf("%q: matched %v, want %v", tc.pattern, got, tc.match)
		}
	}
}

// TestPatternGrowingLog: the match carries on as lines arrive, and names the line it waits
// for.
func TestPatternGrowingLog(t *testing.T) {
	m := &matcher{p: NewPattern("[a] one\n[a] two*three\n[b] four")}
	log := logOf("[a] one", "[a] tw")
	if m.match(log) || m.stuck() != "[a] two*three" {
		t.Fatalf("early match, or stuck at %q", m.stuck())
	}
	log += logOf("[a] two and", "three", "[b] fo")
	if m.match(log) || m.stuck() != "[b] four" {
		t.Fatalf("stuck at %q", m.stuck())
	}
	log += logOf("[b] four")
	if !m.match(log) || m.stuck() != "" {
		t.Fatal("no match once the last line came")
	}
}
