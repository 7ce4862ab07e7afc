package cni

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/netns"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// node is a node's scenario (deploy/cni.hid, or a variant of it) under `nicstack run --name`,
// as a Kubernetes node runs it, with the network config deploy/cni/nicstack.conflist names it
// by and the built plugin.
type node struct {
	t        testing.TB
	run      string // the run's name
	scenario string
	sock     string
	bin      string // the folder of the built binaries, nicstack-cni among them
	cni      string // the plugin binary
	list     map[string]any
	out      *testutil.SyncBuffer
	cmd      *exec.Cmd // nil until started
	done     chan struct{}
}

// startNode starts deploy/cni.hid as the node and waits until it runs.
func startNode(t testing.TB) *node {
	n := newNode(t, "../../deploy/cni.hid")
	n.start()
	return n
}

// newNode prepares a node that runs scenario, not yet started; it stops (SIGINT) at the end
// of the test.
func newNode(t testing.TB, scenario string) *node {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "iperf3", "ip")
	for _, c := range []string{"linux_nic", "nic_router", "vm"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	n := &node{t: t, run: fmt.Sprintf("cnitest-%d", os.Getpid()), scenario: scenario, out: &testutil.SyncBuffer{},
		cni: testutil.Binary(t, "github.com/nicstack/nicstack/cmd/nicstack-cni"), bin: testutil.BinDir(t)}
	b, err := os.ReadFile("../../deploy/cni/nicstack.conflist")
	if err == nil {
		err = json.Unmarshal(b, &n.list)
	}
	plugins, _ := n.list["plugins"].([]any)
	if err != nil || len(plugins) != 1 {
		t.Fatalf("deploy/cni/nicstack.conflist: %v, %d plugins", err, len(plugins))
	}
	plugins[0].(map[string]any)["run"] = n.run
	if n.sock, err = supervisor.InstanceSocket(n.run); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.stop()
		if t.Failed() {
			t.Logf("nicstack output:\n%s", n.out.String())
		}
	})
	return n
}

// conf is the plugin's network config as a runtime hands it: the list's one plugin with the
// list's version and name.
func (n *node) conf() map[string]any {
	conf := map[string]any{}
	for k, v := range n.list["plugins"].([]any)[0].(map[string]any) {
		conf[k] = v
	}
	conf["cniVersion"], conf["name"] = n.list["cniVersion"], n.list["name"]
	return conf
}

func (n *node) start() {
	n.cmd = exec.Command(filepath.Join(n.bin, "nicstack"), "run", "--name", n.run, n.scenario)
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(n.cmd, n.done)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if st, err := supervisor.QueryStatus(n.sock); err == nil && st.Pid == n.cmd.Process.Pid && running(st) {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("the node never ran all its components")
		}
	}
}

// running reports whether every component of st runs.
func running(st supervisor.Status) bool {
	for _, c := range st.Components {
		if c.State != "running" {
			return false
		}
	}
	return len(st.Components) > 0
}

// kill9 kills the supervisor as a crash would; its components follow it (their parent-death
// signal).
func (n *node) kill9() {
	n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
}

// stop stops the node in order, as Ctrl-C does.
func (n *node) stop() {
	if n.cmd == nil {
		return
	}
	select {
	case <-n.done:
		return
	default:
	}
	n.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-n.done:
	case <-time.After(20 * time.Second):
		n.cmd.Process.Kill()
		<-n.done
	}
}

// attachments are the run's attachments.
func (n *node) attachments() []supervisor.Attachment { return n.status().Attachments }

// status is the run's status.
func (n *node) status() supervisor.Status {
	st, err := supervisor.QueryStatus(n.sock)
	if err != nil {
		n.t.Fatal(err)
	}
	return st
}

// plugin runs the plugin's command for container id's ifname eth0 in the namespace at nsPath
// with CNI_ARGS args, as a container runtime does (the environment, and the network config with
// extra's fields on stdin), and returns its stdout; a CNI error comes back as *types.Error.
func (n *node) plugin(command, id, nsPath, args string, extra map[string]any) ([]byte, error) {
	conf := n.conf()
	for k, v := range extra {
		conf[k] = v
	}
	stdin, _ := json.Marshal(conf)
	cmd := exec.Command(n.cni)
	cmd.Env = []string{"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + id, "CNI_NETNS=" + nsPath,
		"CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin", "CNI_ARGS=" + args, "PATH=" + os.Getenv("PATH")}
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		var e types.Error
		if json.Unmarshal(out, &e) == nil && e.Code != 0 {
			return out, &e
		}
		return out, fmt.Errorf("%s: %v: %s", command, err, out)
	}
	return out, nil
}

// reach connects to the far end's iperf3 -s from inside ns, through the router's NAT, trying
// for 20 s while the pod's interface comes up.
func reach(ns *netns.NS) error {
	dial := func() error {
		c, err := net.DialTimeout("tcp", "198.18.0.2:5201", time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err = ns.Do(dial); err == nil || time.Now().After(deadline) {
			return err
		}
	}
}
