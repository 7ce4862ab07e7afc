package supervisor

import "testing"

// TestStateWords pins the words a child's State shows in the status, its JSON and the state
// report: scripts read them.
func TestStateWords(t *testing.T) {
	for st, want := range map[State]string{
		Starting: "starting", Running: "running", Restarting: "waiting", Failed: "failed", Stopped: "stopped", Exited: "exited",
	} {
		if got := st.String(); got != want {
			t.Errorf("State %d shows %q, want %q", int(st), got, want)
		}
	}
}
