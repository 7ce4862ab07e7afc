package main

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// Session churn: a nic_perf opens and closes 300 Nic sessions at one nic_router, one after
// another, while UDP flows between two other clients. Afterwards the router has as many
// interfaces and open files as before, and the flow went on.
func TestSessionChurn(t *testing.T) {
	const sessions = 300
	sc := run(t, "router_udp.xml",
		`<policy label_prefix="rx ->" domain="b"/>`, `<policy label_prefix="rx ->" domain="b"/> <policy label="churn -> " domain="a"/>`,
		`<start name="tx">`, `<!-- churn --> <start name="tx">`)
	sc.waitCounter("rx", "rx_frames", 500)
	sc.waitCounter("nic_router", "interfaces", 2)
	pid := sc.pid("nic_router")
	fds0, ifs0 := fdCount(t, pid), sc.counter("nic_router", "interfaces")
	sc.Edit(`<!-- churn -->`, perfStart("churn", fmt.Sprintf(`ip="10.0.1.7" churn="%d"`, sessions)))
	sc.waitComponent("churn")
	sc.waitCounter("churn", "sessions_closed", sessions)
	if n := sc.counter("churn", "sessions_opened"); n != sessions {
		t.Errorf("%d sessions opened, want %d", n, sessions)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		fds, ifs := fdCount(t, pid), sc.counter("nic_router", "interfaces")
		if fds <= fds0 && ifs == ifs0 {
			t.Logf("router: %d open files, %d interfaces before and after %d sessions", fds0, ifs0, sessions)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d sessions the router has %d open files (%d before) and %d interfaces (%d before)", sessions, fds, fds0, ifs, ifs0)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if sc.pid("nic_router") != pid {
		t.Fatal("the router restarted")
	}
	base := sc.counter("rx", "rx_frames")
	sc.waitCounter("rx", "rx_frames", base+500)
}

func (sc *scenario) pid(component string) int {
	st, _ := sc.S.Status()
	for _, c := range st.Components {
		if c.Name == component {
			return c.Pid
		}
	}
	sc.t.Fatalf("no component %q", component)
	return 0
}

func fdCount(t *testing.T, pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
