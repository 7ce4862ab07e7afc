package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/netns"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// pods is a node (deploy/cni.hid under `nicstack run --name`) and the built plugin, which the
// test runs as a container runtime does: the environment and the network config on stdin.
type pods struct {
	t        *testing.T
	run      string // the run's name
	sock     string
	cni      string // the plugin binary
	conf     map[string]any
	scenario string
	bin      string
	cmd      *exec.Cmd // the run, while it runs
	out      *testutil.SyncBuffer
}

// newPods prepares a node running scenario under a name of the test's, with the network
// config of deploy/cni/nicstack.conflist; the test's end stops it.
func newPods(t *testing.T, scenario string) *pods {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "iperf3", "ip")
	for _, c := range []string{"linux_nic", "nic_router", "vm"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	p := &pods{t: t, run: fmt.Sprintf("cnitest-%d", os.Getpid()), cni: testutil.Binary(t, "github.com/nicstack/nicstack/cmd/nicstack-cni"),
		scenario: scenario, bin: testutil.BinDir(t), out: &testutil.SyncBuffer{}}
	var list struct {
		CNIVersion string           `json:"cniVersion"`
		Name       string           `json:"name"`
		Plugins    []map[string]any `json:"plugins"`
	}
	b, err := os.ReadFile("../../deploy/cni/nicstack.conflist")
	if err != nil || json.Unmarshal(b, &list) != nil || len(list.Plugins) != 1 {
		t.Fatalf("deploy/cni/nicstack.conflist: %v", err)
	}
	// A runtime hands each plugin its entry with the list's version and name.
	p.conf = list.Plugins[0]
	p.conf["cniVersion"], p.conf["name"], p.conf["run"] = list.CNIVersion, list.Name, p.run
	if p.sock, err = supervisor.InstanceSocket(p.run); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("nicstack output:\n%s", p.out.String())
		}
	})
	return p
}

// start starts the run and waits until STATUS says it is ready.
func (p *pods) start() {
	p.cmd = exec.Command(filepath.Join(p.bin, "nicstack"), "run", "--name", p.run, p.scenario)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := p.plugin("STATUS", "", "", "", nil); err == nil {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("STATUS never ready")
		}
	}
}

// stop stops the run as Ctrl-C does (killing it after 20 s), kill with SIGKILL.
func (p *pods) stop() { p.end(syscall.SIGINT) }
func (p *pods) kill() { p.end(syscall.SIGKILL) }

func (p *pods) end(sig syscall.Signal) {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
	p.cmd = nil
}

// reach connects to the far end's iperf3 -s from inside ns, through the router's NAT (ping is
// no tool the tests install), trying for 20 s while the pod's interface comes up.
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

// plugin runs the plugin's command for container id's ifname eth0 in the namespace at nsPath
// with CNI_ARGS args and returns its stdout; a CNI error comes back as *types.Error.
func (p *pods) plugin(command, id, nsPath, args string, extra map[string]any) ([]byte, error) {
	conf := map[string]any{}
	for k, v := range p.conf {
		conf[k] = v
	}
	for k, v := range extra {
		conf[k] = v
	}
	stdin, _ := json.Marshal(conf)
	cmd := exec.Command(p.cni)
	cmd.Env = []string{"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + id, "CNI_NETNS=" + nsPath,
		"CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin", "CNI_ARGS=" + args, "PATH=" + os.Getenv("PATH")}
	cmd.Stdin = strings.NewReader(string(stdin))
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

// attachments are the run's attachments.
func (p *pods) attachments() []supervisor.Attachment {
	st, err := supervisor.QueryStatus(p.sock)
	if err != nil {
		p.t.Fatal(err)
	}
	return st.Attachments
}

// Pods attached by the plugin with static addresses (CNI_ARGS IP=, which win over the
// conflist's dhcp) reach the far end (a TCP connection to its iperf3 server) through the router, CHECK holds, GC detaches
// the ones the runtime no longer lists, DEL is idempotent (twice, and with the run stopped),
// and nothing of theirs stays: no attachment, no interface, no namespace name of the run.
func TestPods(t *testing.T) {
	p := newPods(t, "../../deploy/cni.hid")
	p.start()
	const n = 3
	var spaces []*netns.NS
	t.Cleanup(func() {
		for _, ns := range spaces {
			ns.Close()
		}
	})
	for i := range n {
		ns, err := netns.New("pod")
		if err != nil {
			t.Fatal(err)
		}
		spaces = append(spaces, ns)
		id := fmt.Sprintf("ctr%d", i)
		addr := fmt.Sprintf("10.0.2.%d/24", 10+i)
		res, err := p.plugin("ADD", id, ns.File.Name(), "IP="+addr+";GATEWAY=10.0.2.1", nil)
		if err != nil {
			t.Fatalf("ADD %s: %v", id, err)
		}
		var r types100.Result
		if err := json.Unmarshal(res, &r); err != nil {
			t.Fatalf("ADD %s: result %s: %v", id, res, err)
		}
		if r.CNIVersion != "1.1.0" || len(r.Interfaces) != 1 || r.Interfaces[0].Name != "eth0" || r.Interfaces[0].Sandbox != ns.File.Name() ||
			len(r.IPs) != 1 || r.IPs[0].Address.String() != addr || r.IPs[0].Gateway.String() != "10.0.2.1" || len(r.Routes) != 1 {
			t.Errorf("ADD %s: result %s", id, res)
		}
		if _, err := p.plugin("ADD", id, ns.File.Name(), "IP="+addr+";GATEWAY=10.0.2.1", nil); err == nil {
			t.Errorf("a second ADD of %s succeeded", id)
		}
	}
	for i, ns := range spaces {
		if err := reach(ns); err != nil {
			t.Errorf("pod %d does not reach the far end: %v", i, err)
		}
		if _, err := p.plugin("CHECK", fmt.Sprintf("ctr%d", i), ns.File.Name(), fmt.Sprintf("IP=10.0.2.%d/24;GATEWAY=10.0.2.1", 10+i), nil); err != nil {
			t.Errorf("CHECK pod %d: %v", i, err)
		}
	}
	if _, err := p.plugin("CHECK", "ctr0", spaces[0].File.Name(), "IP=10.0.2.99/24;GATEWAY=10.0.2.1", nil); err == nil {
		t.Error("CHECK with another address holds")
	}

	// GC: the runtime still knows ctr0 only.
	valid := []map[string]string{{"containerID": "ctr0", "ifname": "eth0"}}
	if _, err := p.plugin("GC", "", "", "", map[string]any{"cni.dev/valid-attachments": valid}); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if got := p.attachments(); len(got) != 1 || got[0].ContainerID != "ctr0" || got[0].Ifname != "eth0" {
		t.Errorf("after GC: %+v, want ctr0's attachment only", got)
	}
	for i, ns := range spaces {
		for range 2 {
			if _, err := p.plugin("DEL", fmt.Sprintf("ctr%d", i), ns.File.Name(), "", nil); err != nil {
				t.Errorf("DEL pod %d: %v", i, err)
			}
		}
	}
	if got := p.attachments(); len(got) != 0 {
		t.Errorf("after DEL: %+v", got)
	}
	for i, ns := range spaces {
		for deadline := time.Now().Add(10 * time.Second); ns.IP("link", "show", "eth0") == nil; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("pod %d keeps eth0 after DEL", i)
				break
			}
		}
	}
	pid := p.cmd.Process.Pid
	p.stop()
	if _, err := p.plugin("DEL", "ctr0", spaces[0].File.Name(), "", nil); err != nil {
		t.Errorf("DEL with the run stopped: %v", err)
	}
	var e *types.Error
	if _, err := p.plugin("STATUS", "", "", "", nil); !errors.As(err, &e) || e.Code != types.ErrPluginNotAvailable {
		t.Errorf("STATUS with the run stopped: %v, want code 50", err)
	}
	for _, pattern := range []string{"nst%d-*", "nsa%d-*"} {
		if left, _ := filepath.Glob(filepath.Join("/run/netns", fmt.Sprintf(pattern, pid))); len(left) > 0 {
			t.Errorf("the run left namespaces: %v", left)
		}
	}
	if _, err := os.Stat(filepath.Dir(p.sock)); !os.IsNotExist(err) {
		t.Errorf("the run's folder stays: %v", err)
	}
}
