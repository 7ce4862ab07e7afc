package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nicstack/nicstack/runtime/netns"
)

// Pods attached by the plugin with static addresses (CNI_ARGS IP=, which win over the
// conflist's dhcp) reach the far end (a TCP connection to its iperf3 server) through the router, CHECK holds, GC detaches
// the ones the runtime no longer lists, DEL is idempotent (twice, and with the run stopped),
// and nothing of theirs stays: no attachment, no interface, no namespace name of the run.
func TestPods(t *testing.T) {
	p := startNode(t)

	const pods = 3
	var spaces []*netns.NS
	t.Cleanup(func() {
		for _, ns := range spaces {
			ns.Close()
		}
	})
	for i := range pods {
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
