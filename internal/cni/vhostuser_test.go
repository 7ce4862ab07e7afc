package cni

import (
	"encoding/json"
	"net"
	"os"
	"testing"
	"time"

	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nicstack/nicstack/runtime/netns"
)

// A VM runtime's pod: ADD attaches a vhost-user guest and returns its socket as the
// interface's socketPath, where the guest listens; CHECK holds; DEL (twice) detaches it and
// its socket goes with it.
func TestVhostUserPod(t *testing.T) {
	n := startNode(t)
	ns, err := netns.New("pod")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	vm := map[string]any{"guest": "vhost-user", "ipam": nil}
	out, err := n.plugin("ADD", "vm1", ns.File.Name(), "", vm)
	if err != nil {
		t.Fatal(err)
	}
	var r types100.Result
	if err := json.Unmarshal(out, &r); err != nil || len(r.Interfaces) != 1 || r.Interfaces[0].SocketPath == "" || len(r.IPs) != 0 {
		t.Fatalf("ADD's result %s (%v): want one interface with a socketPath and no IPs", out, err)
	}
	path := r.Interfaces[0].SocketPath
	if a := n.attachments(); len(a) != 1 || a[0].Guest != "vhost-user" || a[0].Socket != path {
		t.Errorf("attachments %+v, want the vhost-user guest at %s", a, path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		t.Fatalf("the front end's socket: %v", err)
	}
	c.Close()
	if _, err := n.plugin("CHECK", "vm1", ns.File.Name(), "", vm); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if _, err := n.plugin("CHECK", "vm2", ns.File.Name(), "", vm); err == nil {
		t.Error("CHECK of a container never added holds")
	}
	for range 2 {
		if _, err := n.plugin("DEL", "vm1", ns.File.Name(), "", vm); err != nil {
			t.Errorf("DEL: %v", err)
		}
	}
	if a := n.attachments(); len(a) != 0 {
		t.Errorf("after DEL: %+v", a)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the detached guest's socket stays: %v", err)
	}
}
