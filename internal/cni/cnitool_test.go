package cni

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/netns"
)

// cnitool is containernetworking/cni's own runtime stand-in, built from the module go.mod
// pins (its tool line), run against the node with deploy/cni/nicstack.conflist.
type cnitool struct {
	n    *node
	path string
	env  []string
}

func newCNITool(n *node) *cnitool {
	dir := n.t.TempDir()
	b, _ := json.Marshal(n.list)
	if err := os.WriteFile(filepath.Join(dir, "nicstack.conflist"), b, 0o644); err != nil {
		n.t.Fatal(err)
	}
	return &cnitool{n: n, path: testutil.Binary(n.t, "github.com/containernetworking/cni/cnitool"),
		env: []string{"NETCONFPATH=" + dir, "CNI_PATH=" + n.bin, "PATH=" + os.Getenv("PATH")}}
}

// static is the CNI_ARGS of pod i when the network config's addresses are static (one
// address each, as a runtime passes them), else "".
func (n *node) static(i int) string {
	ipam, _ := n.conf()["ipam"].(map[string]any)
	if ipam == nil || ipam["type"] != "static" {
		return ""
	}
	return fmt.Sprintf("IP=10.0.2.%d/24;GATEWAY=10.0.2.1", 10+i)
}

// do runs `cnitool command nicstack NETNS` for pod i and returns its output and how long it
// took.
func (c *cnitool) do(command string, i int, ns *netns.NS) ([]byte, time.Duration, error) {
	cmd := exec.Command(c.path, command, "nicstack", ns.File.Name())
	cmd.Env = append(c.env, "CNI_ARGS="+c.n.static(i))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		err = fmt.Errorf("cnitool %s pod %d: %v: %s", command, i, err, out)
	}
	return out, time.Since(start), err
}

// each runs f for every pod at once and returns the first error.
func each(spaces []*netns.NS, f func(i int, ns *netns.NS) error) error {
	errs := make([]error, len(spaces))
	var wg sync.WaitGroup
	for i, ns := range spaces {
		wg.Go(func() { errs[i] = f(i, ns) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// pingFar pings the far end (198.18.0.2, through the router's NAT) from ns until it answers,
// for at most 20 s.
func pingFar(ns *netns.NS) error {
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err = ns.Exec("ping", "-n", "-c", "1", "-W", "1", "198.18.0.2"); err == nil {
			return nil
		}
	}
	return err
}

// Sixteen pods, added by cnitool all at once, reach the far end (ping, and one a real iperf3),
// pass CHECK, come back after the node's supervisor is killed with -9 and started again, and
// go with DEL (twice each) and GC, leaving nothing behind: no attachment, child, interface,
// lease (the router's state report), state file or cached result.
func TestCNIToolSixteenPods(t *testing.T) {
	testutil.RequireCommand(t, "ping")
	n, report := reportingNode(t, t.TempDir())
	n.start()
	tool := newCNITool(n)
	last := time.Now()
	phase := func(what string) {
		t.Logf("%s: %v", what, time.Since(last).Round(time.Millisecond))
		last = time.Now()
	}
	const pods = 16
	var spaces []*netns.NS
	t.Cleanup(func() {
		for _, ns := range spaces {
			ns.Close()
		}
	})
	for range pods {
		ns, err := netns.New("pod")
		if err != nil {
			t.Fatal(err)
		}
		spaces = append(spaces, ns)
	}
	took := make([]time.Duration, pods)
	if err := each(spaces, func(i int, ns *netns.NS) (err error) {
		_, took[i], err = tool.do("add", i, ns)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	phase("16 namespaces and ADDs")
	t.Logf("each ADD: %s", latencies(took))
	if tool.n.static(0) == "" { // the conflist's leases
		waitLeases(t, report, pods)
	}
	if got := n.attachments(); len(got) != pods {
		t.Fatalf("%d attachments after 16 ADDs", len(got))
	}
	if err := each(spaces, func(_ int, ns *netns.NS) error { return pingFar(ns) }); err != nil {
		t.Fatal(err)
	}
	phase("16 pods ping the far end")
	out, err := spaces[0].Exec("iperf3", "-c", "198.18.0.2", "-t", "2", "-J")
	if err != nil {
		t.Fatal(err)
	}
	var iperf struct {
		End struct {
			SumReceived struct {
				Bytes float64 `json:"bytes"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &iperf); err != nil || iperf.End.SumReceived.Bytes == 0 {
		t.Fatalf("iperf3 from pod 0: %v: %s", err, out)
	}
	t.Logf("pod 0's iperf3: %.0f Mbit/s", iperf.End.SumReceived.Bytes*8/2/1e6)
	check := func(when string) {
		t.Helper()
		if err := each(spaces, func(i int, ns *netns.NS) error { _, _, err := tool.do("check", i, ns); return err }); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	check("CHECK")
	phase("16 CHECKs")

	// The supervisor crashes; started again under its name it brings back every pod.
	n.kill9()
	n.start()
	phase("kill -9 and start again")
	if got := n.attachments(); len(got) != pods {
		t.Fatalf("%d attachments restored, want %d", len(got), pods)
	}
	check("CHECK after kill -9 and restart")
	if err := pingFar(spaces[pods-1]); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	phase("16 CHECKs and a ping after the restart")

	for range 2 {
		if err := each(spaces, func(i int, ns *netns.NS) error { _, _, err := tool.do("del", i, ns); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tool.do("gc", 0, spaces[0]); err != nil {
		t.Fatal(err)
	}
	phase("DEL twice and GC")
	n.assertEmpty(spaces)
	waitLeases(t, report, 0)
}

// assertEmpty fails the test if anything of a pod stays in the run: an attachment, an attached
// child, its interface, the run's attachments file, a result the CNI library cached.
func (n *node) assertEmpty(spaces []*netns.NS) {
	t := n.t
	t.Helper()
	if got := n.attachments(); len(got) != 0 {
		t.Errorf("attachments left: %+v", got)
	}
	for _, c := range n.status().Components {
		if c.Attached {
			t.Errorf("attached child left: %s (%s)", c.Name, c.State)
		}
	}
	for i, ns := range spaces {
		for deadline := time.Now().Add(10 * time.Second); ns.IP("link", "show", "eth0") == nil; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("pod %d keeps eth0", i)
				break
			}
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(n.sock), "attachments.json")); !os.IsNotExist(err) {
		t.Errorf("the run keeps attachments.json: %v", err)
	}
	if cached, _ := filepath.Glob("/var/lib/cni/results/nicstack-cnitool-*"); len(cached) > 0 {
		t.Errorf("cached results left: %v", cached)
	}
}

// latencies prints the median and the maximum of d.
func latencies(d []time.Duration) string {
	s := slices.Sorted(slices.Values(d))
	return fmt.Sprintf("median %v, max %v", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}
