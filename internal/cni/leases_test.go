package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nicstack/nicstack/runtime/netns"
)

// waitLeases waits (15 s at most) until the router's state report shows want DHCP
// allocations alive.
func waitLeases(t *testing.T, report string, want int) {
	t.Helper()
	var got int
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var ok bool
		if got, ok = leasesAlive(t, report); ok && got == want {
			return
		}
	}
	b, _ := os.ReadFile(report)
	t.Fatalf("the router's report shows %d DHCP allocations alive, want %d:\n%s", got, want, b)
}

// reportingNode is deploy/cni.hid with the router's state report in a file of dir, whose path
// it returns, and the scenario's other lines replaced as oldNew pairs say.
func reportingNode(t *testing.T, dir string, oldNew ...string) (*node, string) {
	os.Chmod(dir, 0o755)
	report := filepath.Join(dir, "router.xml")
	const anchor = "    + policy | label: pod | domain: pods\n"
	replace := append([]string{anchor, "    + report | interval_sec: 1 | stats: yes | config: no | bytes: no | quota: no | file: " + report + "\n" + anchor}, oldNew...)
	return newNode(t, nodeScenario(t, dir, replace...)), report
}

// leasesAlive is the number of DHCP allocations nic_router's state report shows alive, over
// all its interfaces.
func leasesAlive(t *testing.T, report string) (int, bool) {
	b, err := os.ReadFile(report)
	if err != nil {
		return 0, false
	}
	n := 0
	for _, m := range regexp.MustCompile(`<dhcp-allocations>\s*<alive value="(\d+)"`).FindAllStringSubmatch(string(b), -1) {
		k, _ := strconv.Atoi(m[1])
		n += k
	}
	return n, true
}

// nodeScenario writes deploy/cni.hid into dir, each old, new pair of lines replaced, and returns its
// path.
func nodeScenario(t *testing.T, dir string, oldNew ...string) string {
	b, err := os.ReadFile("../../deploy/cni.hid")
	if err != nil {
		t.Fatal(err)
	}
	hid := string(b)
	for i := 0; i+1 < len(oldNew); i += 2 {
		if !strings.Contains(hid, oldNew[i]) {
			t.Fatalf("deploy/cni.hid has no %q", oldNew[i])
		}
		hid = strings.Replace(hid, oldNew[i], oldNew[i+1], 1)
	}
	path := filepath.Join(dir, "cni.hid")
	if err := os.WriteFile(path, []byte(hid), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Pods with the conflist's ipam, type dhcp, get distinct leases of the pods' range from the
// router's DHCP server, which the supervisor takes for them; the result names the lease with
// the router as gateway and default route; they reach the far end and CHECK holds. A SIGKILL
// of the supervisor and a run of the same name give each pod its address back. DEL releases
// each lease (DHCPRELEASE, the supervisor's log says) and the router's state report then
// shows no DHCP allocation alive.
func TestLeasedPods(t *testing.T) {
	// deploy/cni.hid with the router's state report in a file, and the frames of the pods'
	// domain in its log, where the DHCPRELEASEs show.
	const pods = "    + domain pods | interface: 10.0.2.1/24\n"
	p, report := reportingNode(t, t.TempDir(), pods, strings.TrimSuffix(pods, "\n")+" | verbose_packets: yes\n")
	p.start()

	const n = 3
	var spaces []*netns.NS
	t.Cleanup(func() {
		for _, ns := range spaces {
			ns.Close()
		}
	})
	pool := netip.MustParsePrefix("10.0.2.0/24")
	addrs := map[netip.Prefix]int{}
	for i := range n {
		ns, err := netns.New("pod")
		if err != nil {
			t.Fatal(err)
		}
		spaces = append(spaces, ns)
		id := fmt.Sprintf("ctr%d", i)
		res, err := p.plugin("ADD", id, ns.File.Name(), "K8S_POD_NAME="+id, nil)
		if err != nil {
			t.Fatalf("ADD %s: %v", id, err)
		}
		var r types100.Result
		if err := json.Unmarshal(res, &r); err != nil || len(r.IPs) != 1 {
			t.Fatalf("ADD %s: result %s: %v", id, res, err)
		}
		a, _ := netip.ParsePrefix(r.IPs[0].Address.String())
		if host := a.Addr().As4()[3]; !pool.Contains(a.Addr()) || a.Bits() != 24 || host < 100 || host > 199 ||
			r.IPs[0].Gateway.String() != "10.0.2.1" || len(r.Routes) != 1 || r.Routes[0].GW.String() != "10.0.2.1" {
			t.Errorf("ADD %s: result %s, want a /24 of 10.0.2.100-199 via 10.0.2.1", id, res)
		}
		if _, dup := addrs[a]; dup {
			t.Errorf("ADD %s: %s leased twice", id, a)
		}
		addrs[a] = i
	}
	leased := make([]netip.Prefix, n)
	for a, i := range addrs {
		leased[i] = a
	}
	for i, ns := range spaces {
		if err := reach(ns); err != nil {
			t.Errorf("pod %d (%s) does not reach the far end: %v", i, leased[i], err)
		}
		if _, err := p.plugin("CHECK", fmt.Sprintf("ctr%d", i), ns.File.Name(), "", nil); err != nil {
			t.Errorf("CHECK pod %d: %v", i, err)
		}
	}
	waitLeases(t, report, n)

	// The supervisor killed and a run of the same name: each pod gets its address back.
	p.kill9()
	os.Remove(report)
	p.start()
	for i, ns := range spaces {
		id := fmt.Sprintf("ctr%d", i)
		var err error
		for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if _, err = p.plugin("CHECK", id, ns.File.Name(), "", nil); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("after the restart, CHECK pod %d: %v", i, err)
		}
		for _, a := range p.attachments() {
			if a.ContainerID == id && (a.Lease == nil || a.Lease.Address != leased[i]) {
				t.Errorf("after the restart, pod %d holds %v, want %s", i, a.Lease, leased[i])
			}
		}
		if err := reach(ns); err != nil {
			t.Errorf("after the restart, pod %d does not reach the far end: %v", i, err)
		}
	}
	waitLeases(t, report, n)

	for i, ns := range spaces {
		if _, err := p.plugin("DEL", fmt.Sprintf("ctr%d", i), ns.File.Name(), "", nil); err != nil {
			t.Errorf("DEL pod %d: %v", i, err)
		}
	}
	if got := p.attachments(); len(got) != 0 {
		t.Errorf("after DEL: %+v", got)
	}
	waitLeases(t, report, 0)
	// The router got each release before the pod's session closed (which frees a client's
	// allocation too).
	if released := strings.Count(p.out.String(), "DHCP RELEASE"); released != n {
		t.Errorf("the router logged %d DHCP RELEASEs, want %d", released, n)
	}
}

// An ADD whose lease does not come (the pods' domain has no DHCP server) fails within its
// bound, and nothing of it stays attached.
func TestNoLease(t *testing.T) {
	p := newNode(t, nodeScenario(t, t.TempDir(), "      + dhcp-server | ip_first: 10.0.2.100 | ip_last: 10.0.2.199 | ip_lease_time_sec: 3600\n", ""))
	p.start()
	ns, err := netns.New("pod")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	_, err = p.plugin("ADD", "ctr0", ns.File.Name(), "", nil)
	var e *types.Error
	if !errors.As(err, &e) || e.Code != types.ErrInternal || !strings.Contains(e.Msg, "no DHCP lease") {
		t.Fatalf("ADD without a DHCP server: %v, want code 999, no DHCP lease", err)
	}
	if got := p.attachments(); len(got) != 0 {
		t.Errorf("after the failed ADD: %+v", got)
	}
}

// With a 6 s lease, the supervisor renews a pod's lease at T1, unicast to the router from
// the leased address, and the pod keeps its address past the first lease's end.
func TestLeaseRenewed(t *testing.T) {
	const pods = "    + domain pods | interface: 10.0.2.1/24\n"
	p := newNode(t, nodeScenario(t, t.TempDir(),
		"ip_lease_time_sec: 3600", "ip_lease_time_sec: 6",
		pods, strings.TrimSuffix(pods, "\n")+" | verbose_packets: yes\n"))
	p.start()
	ns, err := netns.New("pod")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if _, err := p.plugin("ADD", "ctr0", ns.File.Name(), "", nil); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	first := p.attachments()[0].Lease
	if first == nil {
		t.Fatal("no lease after ADD")
	}
	// Two renewals at least: the lease then ends 6 s after the first one would have.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		l := p.attachments()[0].Lease
		if l != nil && l.Expires.After(first.Expires.Add(5*time.Second)) {
			if l.Address != first.Address {
				t.Fatalf("renewed as %s, leased as %s", l.Address, first.Address)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease %+v was not renewed twice (first %+v)", l, first)
		}
	}
	if _, err := p.plugin("CHECK", "ctr0", ns.File.Name(), "", nil); err != nil {
		t.Errorf("CHECK past the first lease's end: %v", err)
	}
	unicast := fmt.Sprintf("IPV4 %s > 10.0.2.1 UDP 68 > 67 DHCP REQUEST", first.Address.Addr())
	if !strings.Contains(p.out.String(), unicast) {
		t.Errorf("no renewing REQUEST %q in the router's log", unicast)
	}
	if strings.Contains(p.out.String(), "lost") {
		t.Error("the lease was lost meanwhile")
	}
	if _, err := p.plugin("DEL", "ctr0", ns.File.Name(), "", nil); err != nil {
		t.Errorf("DEL: %v", err)
	}
}
