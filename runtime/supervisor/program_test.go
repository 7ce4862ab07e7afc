package supervisor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/leftover"
)

// A program beside a component: it runs in the run folder, where the socket the component's
// config names is bound before either starts (the program finds it at once); it shows in the
// status with its pid; one that ignores SIGTERM is killed when the run ends, and nothing of
// it or the socket remains.
func TestProgramStartsAndStops(t *testing.T) {
	var pid int
	var sock, runDir string
	t.Cleanup(func() { // after the run's own clean-up, which ends it
		if pid != 0 && leftover.Alive(pid) {
			t.Errorf("the program (pid %d) outlived the run", pid)
		}
		if _, err := os.Stat(sock); err == nil {
			t.Error("the socket outlived the run")
		}
	})
	testutil.Binary(t, "github.com/nicstack/nicstack/components/vm") // beside test_echo
	r := startRun(t, `<config>
		<start name="vm" ram="8M"> <binary name="vm"/> <config guest="stream" socket="vm.sock"/> </start>
		<start name="prog">
			<binary name="sh"/>
			<config> <arg value="sh"/> <arg value="-c"/>
				<arg value="test -S vm.sock &amp;&amp; echo ran in $(pwd); trap '' TERM; while :; do sleep 0.1; done"/> </config>
		</start>
	</config>`, func(o *Options) { runDir = o.RunDir })
	r.waitFor("the program's line", 20*time.Second, func() bool { return strings.Contains(r.logs.String(), "ran in ") })
	if want := "ran in " + runDir + "\n"; !strings.Contains(r.logs.String(), want) {
		t.Errorf("the program did not run in the run folder: want %q in\n%s", want, r.logs.String())
	}
	pid, sock = r.component("prog").Pid, filepath.Join(runDir, "vm.sock")
	if pid == 0 {
		t.Error("the program shows no pid")
	}
}

// A program's command as the supervisor builds it: as another user (executed through the
// descriptor of its binary), with PATH and its <env>s only: a value, the supervisor's own
// for an <env> without one (none when unset), a handed descriptor for open="yes".
func TestProgramCmd(t *testing.T) {
	t.Setenv("NICSTACK_TEST_PASSED", "from the supervisor")
	t.Setenv("NICSTACK_TEST_SECRET", "not for programs")
	os.Unsetenv("NICSTACK_TEST_UNSET")
	dir := t.TempDir()
	cfg, err := config.Parse("f.xml", []byte(`<config> <arg value="sh"/>
		<env key="GREETING" value="hello"/> <env key="NICSTACK_TEST_PASSED"/> <env key="NICSTACK_TEST_UNSET"/>
		<env key="IMAGE" value="`+dir+`" open="yes"/> </config>`))
	if err != nil {
		t.Fatal(err)
	}
	cred := &syscall.Credential{Uid: dynamicUIDBase, Gid: dynamicUIDBase + 1, Groups: []uint32{}}
	cmd, err := programCmd("/bin/sh", []string{"sh"}, cfg, dir, cred)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(cmd.ExtraFiles)
	if c := cmd.SysProcAttr.Credential; c == nil || c.Uid == 0 || c.Gid == 0 || len(c.Groups) != 0 {
		t.Errorf("credential %+v, want an unprivileged uid and gid, no other groups", c)
	}
	if !cmd.SysProcAttr.Setpgid || cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL {
		t.Errorf("attributes %+v, want a process group of its own and SIGKILL when the supervisor dies", cmd.SysProcAttr)
	}
	if cmd.Path != "/proc/self/fd/3" || cmd.Args[0] != "sh" || len(cmd.ExtraFiles) != 2 || cmd.ExtraFiles[0].Name() != "/bin/sh" {
		t.Errorf("runs %s %q with files %v, want /bin/sh through fd 3", cmd.Path, cmd.Args, cmd.ExtraFiles)
	}
	want := []string{"PATH=" + os.Getenv("PATH"), "GREETING=hello", "NICSTACK_TEST_PASSED=from the supervisor", "IMAGE=/proc/self/fd/4"}
	if !slices.Equal(cmd.Env, want) {
		t.Errorf("environment %q, want %q", cmd.Env, want)
	}

	for in, msg := range map[string]string{
		`<env value="x"/>`: `f.xml:1:11: <env> needs a key`,
		`<env key="A" value="/nonexistent" open="yes"/>`: `f.xml:1:11: <env key="A" open="yes">: open /nonexistent: no such file or directory`,
	} {
		cfg, err := config.Parse("f.xml", []byte(`<config> `+in+` </config>`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := programCmd("/bin/sh", []string{"sh"}, cfg, dir, nil); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: error %v, want %q", in, err, msg)
		}
	}
}

// Run by root, a program runs as a uid of its own in the run's program group, without
// capabilities or other groups, with no_new_privs and only the environment it declares, and
// can connect to the socket the supervisor bound for the vm (its group's); privileged="yes"
// runs one as the supervisor's user, which the log says; one whose binary only root may
// execute fails, naming it.
func TestProgramRunsUnprivileged(t *testing.T) {
	testutil.RequireRoot(t)
	t.Setenv("NICSTACK_TEST_SECRET", "not for programs")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/vm")
	private := t.TempDir()
	if err := os.WriteFile(filepath.Join(private, "private"), []byte("#!/bin/sh\necho ran\n"), 0o744); err != nil {
		t.Fatal(err)
	}
	show := `<arg value="sh"/> <arg value="-c"/> <arg value="echo uid=$(id -u) gid=$(id -g) groups=$(id -G) socket=$(stat -c %g:%a vm.sock); ` +
		`test -w vm.sock &amp;&amp; echo writable; grep -E '^(NoNewPrivs|CapEff)' /proc/self/status; env | sort | tr '\n' ' '; echo"/>`
	r := startRun(t, `<config>
		<start name="vm" ram="8M"> <binary name="vm"/> <config guest="stream" socket="vm.sock"/> </start>
		<start name="prog" restart="no"> <binary name="sh"/> <config> `+show+` <env key="GREETING" value="hello"/> </config> </start>
		<start name="root" restart="no" privileged="yes"> <binary name="sh"/> <config> <arg value="sh"/> <arg value="-c"/> <arg value="echo root uid=$(id -u)"/> </config> </start>
		<start name="private" restart="no"> <binary name="private"/> <config> <arg value="private"/> </config> </start>
	</config>`, func(o *Options) { o.BinDirs = append([]string{private}, o.BinDirs...) })
	denied := "starting " + filepath.Join(private, "private") + " as uid "
	r.waitFor("the programs' lines", 20*time.Second, func() bool {
		l := r.logs.String()
		return strings.Contains(l, "GREETING=hello") && strings.Contains(l, "root uid=") && strings.Contains(l, denied)
	})
	logs := r.logs.String()
	var uid, gid, groups, sock string
	for _, l := range strings.Split(logs, "\n") {
		if i := strings.Index(l, "uid="); i >= 0 && !strings.Contains(l, "root uid=") {
			for _, f := range strings.Fields(l[i:]) {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "uid":
					uid = v
				case "gid":
					gid = v
				case "groups":
					groups = v
				case "socket":
					sock = v
				}
			}
		}
	}
	if uid == "" || uid == "0" || gid == "0" || groups != gid {
		t.Errorf("the program ran as uid %q gid %q groups %q, want its own uid and only the program group", uid, gid, groups)
	}
	if g, mode, _ := strings.Cut(sock, ":"); g != gid || len(mode) != 3 || mode[1] < '6' || !strings.Contains(logs, "writable") {
		t.Errorf("vm.sock is %q (group:mode), want group %s with read and write, writable by the program", sock, gid)
	}
	for _, want := range []string{"NoNewPrivs:\t1", "CapEff:\t0000000000000000", "root uid=0", `root runs as the supervisor's user (privileged=\"yes\")`} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %q in the output:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "NICSTACK_TEST_SECRET") || strings.Contains(logs, "HOME=") {
		t.Errorf("the program got the supervisor's environment:\n%s", logs)
	}
}
