package libvirt

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
)

const deployed = "../../deploy/libvirt/nicstack-guest.xml"

func readDeployed(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(deployed)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// deploy/libvirt's domain is one a vm with guest="vhost-user" serves: shared memfd memory, a
// vhostuser interface that is a virtio client of an absolute socket.
func TestDeployedDomainFitsVhostUser(t *testing.T) {
	if err := Check(readDeployed(t)); err != nil {
		t.Fatal(err)
	}
}

// libvirt's own schema takes deploy/libvirt's domain.
func TestDeployedDomainValidates(t *testing.T) {
	testutil.RequireCommand(t, "virt-xml-validate", "xmllint")
	out, err := exec.Command("virt-xml-validate", deployed, "domain").CombinedOutput()
	if err != nil {
		t.Fatalf("virt-xml-validate: %v\n%s", err, out)
	}
}

// Fit puts a test's guest into the domain, escaping the command line, and the result still
// fits vhost-user.
func TestFit(t *testing.T) {
	g := Guest{Name: "t1", KVM: true, Kernel: "/i/vmlinuz", Initrd: "/i/initrd.img",
		Cmdline: `console=ttyS0 run="a && b -x 'y'"`, Socket: "/tmp/x/vm.sock", Console: "/tmp/x/console"}
	text, err := Fit(readDeployed(t), g)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<domain type='kvm'", "<name>t1</name>", "<kernel>/i/vmlinuz</kernel>", "<initrd>/i/initrd.img</initrd>",
		"<cmdline>console=ttyS0 run=&#34;a &amp;&amp; b -x &#39;y&#39;&#34;</cmdline>", "path='/tmp/x/vm.sock' mode='client'", "<source path='/tmp/x/console'/>"} {
		if !strings.Contains(text, want) {
			t.Errorf("the fitted domain lacks %q", want)
		}
	}
	if _, err := Fit(strings.Replace(readDeployed(t), "<initrd>", "<!-- <initrd> -->", 1), g); err == nil {
		t.Error("Fit took a domain without its initrd's place")
	}
}

// What keeps a domain from working on nicstack is refused with what is missing.
func TestCheckRefuses(t *testing.T) {
	good := readDeployed(t)
	for _, c := range []struct{ old, new, want string }{
		{"<access mode='shared'/>", "", "memoryBacking"},
		{"<source type='memfd'/>", "<source type='file'/>", "memoryBacking"},
		{"vm.sock' mode='client'", "vm.sock' mode='server'", "mode='client'"},
		{"path='/run/nicstack/", "path='run/nicstack/", "absolute"},
		{"<interface type='vhostuser'>", "<interface type='user'>", "no <interface type='vhostuser'>"},
		{"<domain type='qemu'", "<domain type='xen'", "domain type"},
	} {
		if !strings.Contains(good, c.old) {
			t.Fatalf("the deployed domain has no %q", c.old)
		}
		err := Check(strings.Replace(good, c.old, c.new, 1))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q -> %q: %v, want an error naming %q", c.old, c.new, err, c.want)
		}
	}
}

// The daemon starts with its own config and state, answers virsh with no domain, and leaves
// no process and nothing on the host's libvirt folders when stopped.
func TestDaemonStartsAndStops(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "libvirtd", "virsh", "unshare")
	_, hostRun := os.Stat("/run/libvirt")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	out, err := d.Virsh(ctx, "list", "--all", "--name")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("virsh list: %q, %v; want no domain", out, err)
	}
	if _, err := os.Stat(filepath.Join(d.Dir, "run", "libvirt", "qemu")); err != nil {
		t.Errorf("the QEMU driver's state is not in the daemon's folder: %v", err)
	}
	d.Stop()
	if pids := Processes(d.Dir); len(pids) > 0 {
		t.Errorf("processes %v outlived the daemon", pids)
	}
	if _, err := os.Stat("/run/libvirt"); (err == nil) != (hostRun == nil) {
		t.Error("the daemon changed the host's /run/libvirt")
	}
}
