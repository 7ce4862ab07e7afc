// Package libvirt runs VMs as libvirt's users do, for tests: a libvirt daemon of the test's
// own, privileged (qemu:///system) but touching nothing of the host's, and the domain XML of
// deploy/libvirt checked and fitted to a test's guest image and socket.
package libvirt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/leftover"
)

// Daemon is a libvirtd in a mount and PID namespace of its own. The folders it would share
// with the host's libvirt (/etc/libvirt, /run, /var) are folders of Dir there, so its config,
// state, domains and logs stay in Dir; its QEMUs are in its PID namespace and die with it.
// What its domains name (kernel, sockets, console files) must be outside /run and /var too.
// Debian 12 ships the monolithic libvirtd only (virtqemud came later to Debian).
type Daemon struct {
	Dir string // config, state, the client socket, logs
	URI string // what virsh -c takes

	cmd  *exec.Cmd
	log  testutil.SyncBuffer // libvirtd's warnings and errors
	done chan struct{}
	once sync.Once
}

// The daemon's config: clients on a socket in Dir, no authentication (it is root's and
// Dir's); warnings and errors to stderr.
const libvirtdConf = `unix_sock_dir = "%s"
auth_unix_ro = "none"
auth_unix_rw = "none"
log_outputs = "3:stderr"
`

// The QEMU driver's config: QEMU as root (it reaches the test's socket and files), no
// security driver (AppArmor or SELinux profiles are the
// host's), no cgroups and no namespaces of libvirt's (a container may not allow them), QEMU's
// output to a file instead of virtlogd.
const qemuConf = `user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
stdio_handler = "file"
`

// start mounts Dir's folders in place of the host's and runs libvirtd with the QEMU driver
// only (no network, nwfilter or storage driver: no default network, no firewall rule) and no
// autostart. sh stays the namespace's init: libvirtd daemonizes each QEMU, which is then sh's
// child, and sh's wait reaps it (libvirt waits for a destroyed QEMU's pid to vanish).
const start = `d="$1"
mount --bind "$d/etc" /etc/libvirt && mount --bind "$d/passwd" /etc/passwd && mount --bind "$d/group" /etc/group &&
mount --bind "$d/run" /run && mount --bind "$d/var" /var || exit 1
LIBVIRT_DRIVER_DIR="$d/drivers" LIBVIRT_AUTOSTART=0 libvirtd -f "$d/etc/libvirtd.conf" -p "$d/libvirtd.pid" &
wait
`

// Start runs a daemon in dir (an empty folder outside /etc/libvirt, /run and /var, which the
// daemon does not see as the host has them) and waits until it answers. Stop ends it.
func Start(ctx context.Context, dir string) (*Daemon, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for _, hidden := range []string{"/etc/libvirt", "/run", "/var"} {
		if dir == hidden || strings.HasPrefix(dir, hidden+"/") {
			return nil, fmt.Errorf("libvirt daemon folder %s: under %s, which the daemon has a folder of its own for", dir, hidden)
		}
	}
	if fi, err := os.Stat("/etc/libvirt"); err != nil || !fi.IsDir() {
		return nil, errors.New("no /etc/libvirt to mount the daemon's config on (is libvirt-clients installed?)")
	}
	driver, err := qemuDriver()
	if err != nil {
		return nil, err
	}
	if err := layout(dir, driver); err != nil {
		return nil, err
	}
	d := &Daemon{Dir: dir, URI: "qemu:///system?socket=" + filepath.Join(dir, "sock", "libvirt-sock"), done: make(chan struct{})}
	d.cmd = exec.Command("unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child",
		"sh", "-c", start, "sh", dir)
	d.cmd.Stdout, d.cmd.Stderr = &d.log, &d.log
	// unshare ignores SIGTERM while it waits; SIGKILL on it kills the namespace's init
	// (--kill-child) and with it every process in the namespace.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting libvirtd: %w", err)
	}
	go func() { d.cmd.Wait(); close(d.done) }()
	if err := d.ready(ctx); err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

// qemuDriver finds the QEMU driver module of libvirt's daemon.
func qemuDriver() (string, error) {
	for _, pattern := range []string{"/usr/lib/*/libvirt/connection-driver/libvirt_driver_qemu.so",
		"/usr/lib64/libvirt/connection-driver/libvirt_driver_qemu.so"} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", errors.New("no libvirt_driver_qemu.so (install libvirt-daemon-driver-qemu)")
}

// layout makes the daemon's folders and files in dir.
func layout(dir, driver string) error {
	for _, sub := range []string{"etc", "run/libvirt", "var/lib/libvirt", "var/log/libvirt", "var/cache/libvirt", "var/tmp", "sock", "drivers"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return err
		}
	}
	files := map[string]string{
		"etc/libvirtd.conf": fmt.Sprintf(libvirtdConf, filepath.Join(dir, "sock")),
		"etc/qemu.conf":     qemuConf,
	}
	// The QEMU driver looks its build's default user up (libvirt-qemu on Debian) before it
	// reads qemu.conf; libvirt-daemon-system would create that user on the host, the
	// namespace's passwd and group have it instead.
	for _, f := range []struct{ name, line string }{{"passwd", "libvirt-qemu:x:64055:64055:libvirt's QEMU:/nonexistent:/usr/sbin/nologin"},
		{"group", "libvirt-qemu:x:64055:"}} {
		b, err := os.ReadFile("/etc/" + f.name)
		if err != nil {
			return err
		}
		text := string(b)
		if !strings.HasPrefix(text, "libvirt-qemu:") && !strings.Contains(text, "\nlibvirt-qemu:") {
			text = strings.TrimSuffix(text, "\n") + "\n" + f.line + "\n"
		}
		files[f.name] = text
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return err
		}
	}
	if err := os.Symlink("/run", filepath.Join(dir, "var", "run")); err != nil {
		return err
	}
	return os.Symlink(driver, filepath.Join(dir, "drivers", filepath.Base(driver)))
}

// ready waits until the daemon answers virsh, or ends, or ctx does.
func (d *Daemon) ready(ctx context.Context) error {
	for {
		select {
		case <-d.done:
			return fmt.Errorf("libvirtd ended at start: %s", d.Log())
		case <-ctx.Done():
			return fmt.Errorf("libvirtd did not answer: %w: %s", ctx.Err(), d.Log())
		case <-time.After(200 * time.Millisecond):
		}
		if _, err := os.Stat(filepath.Join(d.Dir, "sock", "libvirt-sock")); err != nil {
			continue
		}
		if _, err := d.Virsh(ctx, "version"); err == nil {
			return nil
		}
	}
}

// Virsh runs virsh on the daemon and returns its output; an error carries the output.
func (d *Daemon) Virsh(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "virsh", append([]string{"-q", "-c", d.URI}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("virsh %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// Log is what libvirtd printed: its warnings and errors.
func (d *Daemon) Log() string { return d.log.String() }

// QEMULog is libvirt's log of domain name: QEMU's command line and its messages.
func (d *Daemon) QEMULog(name string) string {
	b, _ := os.ReadFile(filepath.Join(d.Dir, "var", "log", "libvirt", "qemu", name+".log"))
	return string(b)
}

// Stop kills the daemon's namespace, and with it libvirtd and any QEMU still running, and
// waits for it. Dir stays (the caller's).
func (d *Daemon) Stop() {
	d.once.Do(func() {
		syscall.Kill(d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.done
	})
}

// Processes lists the processes whose command line holds s (a daemon's Dir: its libvirtd;
// "guest=NAME": domain NAME's QEMU), for tests that check what outlived a daemon.
func Processes(s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(s)) && leftover.Alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
