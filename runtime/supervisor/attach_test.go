package supervisor

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/dhcplease"
)

// attachScenario has two servers of Nic, the router (whose policies select its clients) and a
// NIC, and a DHCP pool of two addresses that the file's vm1 takes one of.
const attachScenario = `<config>
	<parent-provides><service name="LOG"/></parent-provides>
	<default-route><any-service><parent/><any-child/></any-service></default-route>
	<affinity-space width="2" height="1"/>
	<start name="intel_nic_hw"><provides><service name="Nic"/></provides></start>
	<start name="nic_router">
		<provides><service name="Nic"/></provides>
		<config>
			<policy label_prefix="vm" domain="default"/>
			<domain name="default" interface="10.0.1.1/24">
				<dhcp-server ip_first="10.0.1.2" ip_last="10.0.1.3"/>
			</domain>
		</config>
	</start>
	<start name="vm1">
		<binary name="vm"/>
		<route><service name="Nic"><child name="nic_router"/></service><any-service><parent/></any-service></route>
	</start>
</config>`

// planner is a supervisor of attachScenario that is not running: its binaries are files that
// are never started.
func planner(t *testing.T, scenario, stateDir string) (*Supervisor, *testutil.SyncBuffer) {
	t.Helper()
	bin := t.TempDir()
	for _, b := range []string{"intel_nic_hw", "nic_router", "vm"} {
		if err := os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/false\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "scenario.xml")
	if err := os.WriteFile(path, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	s, err := New(path, Options{BinDirs: []string{bin}, Components: components.Table, Out: NewOutput(logs, false), StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// take plans a and, as the loop would, makes it part of the running scenario.
func take(t *testing.T, s *Supervisor, a Attachment) Attachment {
	t.Helper()
	sc, a, err := s.plan(a)
	if err != nil {
		t.Fatal(err)
	}
	s.sc, s.attached = sc, append(s.attached, a)
	if err := s.saveAttachments(); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAttachPlan(t *testing.T) {
	s, _ := planner(t, attachScenario, "")
	a := take(t, s, Attachment{Name: "vm2", Affinity: "1,0"})
	if a.Guest != "embedded" || a.Label != "vm2" || a.Router != "nic_router" {
		t.Errorf("defaults: %+v, want an embedded guest labelled vm2 at nic_router", a)
	}
	st := s.sc.Start("vm2")
	if st == nil || st.Binary != "vm" || st.Affinity == nil || st.Affinity.X != 1 {
		t.Fatalf("vm2's start: %+v", st)
	}
	d, err := s.sc.Resolve(st, "Nic", "")
	if err != nil || d.Server != "nic_router" || d.Label != "vm2" {
		t.Errorf("vm2's Nic session goes to %+v (%v), want nic_router with label vm2", d, err)
	}
	if d, err := s.sc.Resolve(st, "LOG", ""); err != nil || !d.Parent {
		t.Errorf("vm2's LOG session: %+v (%v), want the parent as the default route says", d, err)
	}
	for _, tc := range []struct {
		a   Attachment
		err string
	}{
		{Attachment{Name: "vm1"}, "the scenario file has that name already"},
		{Attachment{Name: "vm2"}, "an attachment has that name already"},
		{Attachment{Name: "vm3"}, `the address pool of domain "default" (10.0.1.2..10.0.1.3, 2 addresses) is full`},
		{Attachment{Name: "c1", Label: "other"}, `no <policy> of the router selects the label "other"`},
		{Attachment{Name: "c1", Router: "nope"}, `router "nope": the scenario has no such child`},
		{Attachment{Name: "c1", Router: "vm1"}, `router "vm1" does not provide Nic`},
		{Attachment{Name: "c1", Affinity: "2,0"}, `affinity "2,0": want X,Y within the affinity space 2x1`},
		{Attachment{Name: "c1", Guest: "tun"}, `guest "tun": want embedded, netns, tap, vhost-user`},
		{Attachment{Name: "c1", Guest: "tap", Address: "10.0.1.9/24"}, "stays unconfigured"},
		{Attachment{Name: "c-1", Guest: "tap"}, "a tap guest's name names its namespace"},
		{Attachment{Name: "c1", Guest: "netns"}, "needs the address of its Linux side"},
		{Attachment{Name: "c1", Guest: "netns", Address: "dhcp", Gateway: "10.0.1.1"}, "takes its gateway from the lease"},
		{Attachment{Name: "c1", Guest: "netns", Address: "10.0.1.9/24", Netns: "/run/netns/nicstack-no-such-ns"}, "namespace /run/netns/nicstack-no-such-ns: no such file or directory"},
		{Attachment{Name: "c1", Address: "10.0.1.9/24"}, "for a netns guest"},
		{Attachment{Name: "c1", Ifname: "eth0"}, "for a netns guest"},
		{Attachment{Name: "c1", Guest: "netns", Address: "10.0.1.9/24", Ifname: "eth/0"}, `ifname="eth/0"`},
		{Attachment{Name: "a/b"}, "a name may not contain"},
	} {
		before := len(s.sc.Starts)
		_, _, err := s.plan(tc.a)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: got %v, want an error with %q", tc.a, err, tc.err)
		}
		if len(s.sc.Starts) != before || len(s.attached) != 1 {
			t.Errorf("%+v: a refused attach changed the scenario", tc.a)
		}
	}
	// A CNI runtime's container: its interface named as it asks, its container id only kept.
	cni := Attachment{Name: "c1", Guest: "netns", Netns: "/run/netns/c1", Address: "10.0.1.9/24", Ifname: "eth0", ContainerID: "ctr1"}
	if cfg := cni.start(s.file).Sub("config"); cfg.String("ifname", "") != "eth0" || cfg.String("netns_path", "") != "/run/netns/c1" {
		t.Errorf("a netns attachment's config: %v", cfg.Attrs)
	}
	tap := Attachment{Name: "c1", Guest: "tap", Netns: "/run/netns/c1", Ifname: "eth0"}
	if cfg := tap.start(s.file).Sub("config"); cfg.String("guest", "") != "netns" || cfg.String("tap_address", "") != "none" || cfg.String("ifname", "") != "eth0" {
		t.Errorf("a tap attachment's config: %v", cfg.Attrs)
	}
	// intel_nic_hw's component selects no clients: a label it is asked for is its business.
	if _, _, err := s.plan(Attachment{Name: "c1", Label: "other", Router: "intel_nic_hw"}); err != nil {
		t.Errorf("attaching at intel_nic_hw: %v", err)
	}
	// A vhost-user guest's socket is the supervisor's to say: the one its config defaults to,
	// in the run folder.
	s.opts.RunDir = t.TempDir()
	sc, vu, err := s.plan(Attachment{Name: "c2", Guest: "vhost-user", Router: "intel_nic_hw", Socket: "/etc/elsewhere.sock"})
	if err != nil {
		t.Fatal(err)
	}
	socks, err := s.socketsOf(sc.Start("c2"))
	if err != nil || len(socks) != 1 || vu.Socket != filepath.Join(s.opts.RunDir, "c2.sock") || socks[0].path != vu.Socket {
		t.Errorf("vhost-user attachment's socket %q, the supervisor listens on %v (%v)", vu.Socket, socks, err)
	}
	s.closeSockets()
	if err := s.detach("vm1", "detached"); err == nil || !strings.Contains(err.Error(), "remove it from the file") {
		t.Errorf("detaching a start of the file: %v", err)
	}
	if err := s.detach("vm9", "detached"); err == nil || !strings.Contains(err.Error(), `no attachment "vm9"`) {
		t.Errorf("detaching what is not there: %v", err)
	}
}

// A leased address's lease is kept with its attachment and comes back with it.
func TestLeaseKept(t *testing.T) {
	dir := t.TempDir()
	s, _ := planner(t, attachScenario, dir)
	l := &dhcplease.Lease{Address: netip.MustParsePrefix("10.0.1.2/24"), Server: netip.MustParseAddr("10.0.1.1"), Expires: time.Now().Add(time.Hour)}
	a := take(t, s, Attachment{Name: "vm_c1", Guest: "netns", Address: "dhcp"})
	if cfg := a.start(s.file).Sub("config"); cfg.String("tap_address", "") != "dhcp" {
		t.Errorf("a leased attachment's config: %v", cfg.Attrs)
	}
	s.keepLease("vm_c1", l)
	again, _ := planner(t, attachScenario, dir)
	if got := again.leaseOf("vm_c1"); got == nil || got.Address != l.Address || got.Server != l.Server || !got.Expires.Equal(l.Expires) {
		t.Fatalf("restored lease %+v, want %+v", got, l)
	}
	s.keepLease("vm_c1", nil)
	if again, _ := planner(t, attachScenario, dir); again.leaseOf("vm_c1") != nil {
		t.Error("a lost lease is still kept")
	}
}

func TestAttachmentsKept(t *testing.T) {
	dir := t.TempDir()
	s, _ := planner(t, attachScenario, dir)
	take(t, s, Attachment{Name: "vm2"})
	var saved []Attachment
	b, err := os.ReadFile(filepath.Join(dir, attachmentsFile))
	if err != nil || json.Unmarshal(b, &saved) != nil || len(saved) != 1 || saved[0].Name != "vm2" || saved[0].Router != "nic_router" {
		t.Fatalf("kept %s (%v), want vm2 at nic_router", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, attachmentsFile+".new")); !os.IsNotExist(err) {
		t.Errorf("the temporary file stayed: %v", err)
	}

	// A run of the same name starts with them.
	again, _ := planner(t, attachScenario, dir)
	if again.attachment("vm2") == nil || again.sc.Start("vm2") == nil {
		t.Fatalf("vm2 not restored: %+v", again.attached)
	}

	// One that no longer fits (the file has its name now) is dropped, and so is its record.
	clash := strings.Replace(attachScenario, `<start name="vm1">`, `<start name="vm2">`, 1)
	dropped, logs := planner(t, clash, dir)
	if len(dropped.attached) != 0 || !strings.Contains(logs.String(), "vm2 not restored") {
		t.Errorf("attachments %+v, log %s: want vm2 dropped", dropped.attached, logs)
	}
	if _, err := os.Stat(filepath.Join(dir, attachmentsFile)); !os.IsNotExist(err) {
		t.Errorf("the record of no attachments is still there: %v", err)
	}
}
