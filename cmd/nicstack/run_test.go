package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/leftover"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// nicstackRun is `nicstack run` on a scenario with its own TMPDIR, status socket and report
// file.
type nicstackRun struct {
	cmd                 *exec.Cmd
	tmp, socket, report string
	metrics             string
	bin                 string
	pid                 int // of the supervisor, once it was killed
}

// startNicstack runs the scenario file and waits until ready holds for its status.
func startNicstack(t *testing.T, scenario string, ready func(supervisor.Status) bool) *nicstackRun {
	testutil.Binary(t, "github.com/nicstack/nicstack/components/test_echo")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/test_client")
	bin := testutil.BinDir(t)
	dir := testutil.ReachableTempDir(t)
	r := &nicstackRun{bin: bin, tmp: filepath.Join(dir, "tmp"), socket: filepath.Join(dir, "status.sock"), report: filepath.Join(dir, "report.xml")}
	os.Mkdir(r.tmp, 0o711)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.metrics = l.Addr().String()
	l.Close()
	r.cmd = exec.Command(filepath.Join(bin, "nicstack"), "run", "--socket", r.socket, "--report", r.report,
		"--metrics", r.metrics, scenario)
	r.cmd.Env = append(os.Environ(), "TMPDIR="+r.tmp)
	out, _ := os.Create(filepath.Join(dir, "out.log"))
	r.cmd.Stdout, r.cmd.Stderr = out, out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("nicstack output:\n%s", b)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := supervisor.QueryStatus(r.socket)
		if err == nil && ready(st) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never got ready: %+v %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startEcho runs deploy/test_echo.xml until frames flow from test_echo to test_client.
func startEcho(t *testing.T) *nicstackRun {
	return startNicstack(t, "../../deploy/test_echo.xml", func(st supervisor.Status) bool {
		return len(st.Components) == 2 && st.Components[1].Counters["received"] > 100
	})
}

// interrupt stops the run as Ctrl-C does and waits for it to return.
func (r *nicstackRun) interrupt(t *testing.T) {
	t.Helper()
	r.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("nicstack run after Ctrl-C: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("nicstack run did not stop on Ctrl-C")
	}
}

func (r *nicstackRun) pids(t *testing.T) []int {
	st, err := supervisor.QueryStatus(r.socket)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, c := range st.Components {
		pids = append(pids, c.Pid)
	}
	return pids
}

func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for leftover.Alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("component pid %d still runs", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestRunStatusMetricsAndCtrlC(t *testing.T) {
	r := startEcho(t)
	out, err := exec.Command(filepath.Join(r.bin, "nicstack"), "status", "--socket", r.socket).CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, want := range []string{"affinity space 4x2", "NAME", "CPUS", "test_echo", "test_client", `session 1 client Nic "client-uplink" link up`, "received ", "  queues:", "client-uplink tx acks"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	out, err = exec.Command(filepath.Join(r.bin, "nicstack"), "status", "--socket", r.socket, "--json").Output()
	var st supervisor.Status
	if err != nil || json.Unmarshal(out, &st) != nil || len(st.Components) != 2 || st.Components[0].CPUs == "" {
		t.Errorf("status --json: %v\n%s", err, out)
	}
	for _, c := range st.Components {
		if len(c.Queues) == 0 {
			t.Errorf("status --json: %s reports no queues", c.Name)
		}
	}
	if !strings.Contains(string(out), `"sojourn_ns": `) {
		t.Errorf("status --json names no sojourn:\n%s", out)
	}
	resp, err := http.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`nicstack_component_up{component="test_echo",cpus=`, `nicstack_session_frames_total{component="test_client"`, `nicstack_received_total{component="test_client"}`, `nicstack_queue_sojourn_seconds{component="test_echo",hop=`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	time.Sleep(1100 * time.Millisecond) // one report
	if b, err := os.ReadFile(r.report); err != nil || !strings.Contains(string(b), `<child name="test_echo"`) {
		t.Errorf("state report: %v\n%s", err, b)
	}

	pids := r.pids(t)
	r.interrupt(t)
	waitGone(t, pids)
	if ents, _ := os.ReadDir(r.tmp); len(ents) != 0 {
		t.Errorf("the run left %d entries in its TMPDIR: %v", len(ents), ents)
	}
	if _, err := os.Stat(r.socket); !os.IsNotExist(err) {
		t.Error("status socket left behind")
	}
}

// TestRunDeletesItsNamespacesOnCtrlC: `nicstack run` serves Tap and Packet sessions (the host
// services it hands the supervisor), and Ctrl-C deletes every namespace they made
// (nst<pid>-<name><n>: the scenario's a and b, the Packet session's own).
func TestRunDeletesItsNamespacesOnCtrlC(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "ip")
	scenario := filepath.Join(t.TempDir(), "parent.xml")
	if err := os.WriteFile(scenario, []byte(`<config>
	<parent-provides> <service name="Tap"/> <service name="Packet"/> </parent-provides>
	<start name="tapper"> <binary name="test_client"/>
		<route> <service name="Tap"> <parent/> </service> </route>
		<config service="Tap" netns="a"/> </start>
	<start name="packer"> <binary name="test_client"/>
		<route> <service name="Packet"> <parent/> </service> </route>
		<config service="Packet" netns="b"/> </start>
</config>`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startNicstack(t, scenario, func(st supervisor.Status) bool {
		open := 0
		for _, c := range st.Components {
			for _, req := range c.Requests {
				if req.Server == "parent" && req.State == "open" {
					open++
				}
			}
		}
		return open == 2
	})
	namespaces := func() []string {
		var names []string
		ents, _ := os.ReadDir("/run/netns")
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), fmt.Sprintf("nst%d-", r.cmd.Process.Pid)) {
				names = append(names, e.Name())
			}
		}
		return names
	}
	if ns := namespaces(); len(ns) != 3 {
		t.Errorf("the run has namespaces %v, want 3 (a, b and the Packet session's)", ns)
	}
	r.interrupt(t)
	if ns := namespaces(); len(ns) != 0 {
		t.Errorf("Ctrl-C left namespaces %v", ns)
	}
}

func TestComponentsDieWithTheSupervisor(t *testing.T) {
	r := startEcho(t)
	pids := r.pids(t)
	r.cmd.Process.Signal(syscall.SIGKILL)
	r.cmd.Wait()
	waitGone(t, pids) // Pdeathsig
}

func TestCheckCommand(t *testing.T) {
	bin := testutil.BinDir(t)
	testutil.Binary(t, "github.com/nicstack/nicstack/components/test_echo")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/test_client")
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	nicstack := func(args ...string) (string, error) {
		out, err := exec.Command(filepath.Join(bin, "nicstack"), args...).CombinedOutput()
		return string(out), err
	}
	if out, err := nicstack("check", "../../deploy/test_echo.hid"); err != nil || !strings.Contains(out, "ok") {
		t.Errorf("check of the shipped scenario: %v\n%s", err, out)
	}
	broken := write("broken.xml", `<config>
<start name="test_echo" ram="1M"> <provides> <service name="Nic"/> </provides> </start>
<start name="nic_drv"/>
<start name="test_client"> <route> <service name="Uplink"> <child name="test_echo"/> </service> </route> </start>
</config>`)
	out, err := nicstack("check", broken)
	for _, want := range []string{
		broken + `:3:2: binary of "nic_drv": "nic_drv" is not a nicstack component (known: `,
		broken + `:4:61: route of test_client: <child name="test_echo"/> routes Uplink to "test_echo", which does not provide it (<provides>)`,
		"broken.xml: 2 problem(s)",
	} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("check broken.xml lacks %q:\n%s", want, out)
		}
	}
	// A value the component itself would refuse is found without starting it, and a bench of
	// the scenario stops at once with the same message.
	badMTU := write("bad_mtu.xml", `<config>
<start name="vm"> <config guest="embedded" mtu="70000"/> </start>
</config>`)
	out, err = nicstack("check", badMTU)
	if err == nil || !strings.Contains(out, badMTU+`:2:44: mtu=70000 is out of range (576..65000)`) {
		t.Errorf("check of a vm config with a bad mtu: %v\n%s", err, out)
	}
	out, err = nicstack("bench", "iperf", "--time", "1s", badMTU)
	if err == nil || !strings.Contains(out, badMTU+`:2:44: mtu=70000 is out of range`) {
		t.Errorf("bench iperf of a vm config with a bad mtu: %v\n%s", err, out)
	}
	cfg := write("client.hid", "config | window: 8 | sise: 1\n-\n")
	out, err = nicstack("check", "--component", "test_client", cfg)
	if err == nil || !strings.Contains(out, cfg+`:1:22: unknown attribute "sise" of <config>; did you mean size?`) {
		t.Errorf("check --component: %v\n%s", err, out)
	}
}

// TestRunExitPropagate: `nicstack run` logs a child's exit as Genode's init does and does not
// restart it; with <exit propagate="yes"/> it exits with the child's exit value.
func TestRunExitPropagate(t *testing.T) {
	testutil.Binary(t, "github.com/nicstack/nicstack/components/test_echo")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/test_client")
	bin := testutil.BinDir(t)
	dir := t.TempDir()
	scenario := filepath.Join(dir, "exit.xml")
	os.WriteFile(scenario, []byte(`<config>
	<start name="echo"> <binary name="test_echo"/> <provides> <service name="Nic"/> </provides> </start>
	<start name="first"> <binary name="test_client"/>
		<route> <service name="Nic"> <child name="echo"/> </service> </route>
		<config count="10" exit_value="0"/>
	</start>
	<start name="last"> <binary name="test_client"/>
		<route> <service name="Nic"> <child name="echo"/> </service> </route>
		<exit propagate="yes"/>
		<config count="2000" interval_us="1000" exit_value="7"/>
	</start>
</config>`), 0o644)
	cmd := exec.Command(filepath.Join(bin, "nicstack"), "run", "--log-format", "genode", "--socket", filepath.Join(dir, "s.sock"), scenario)
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("nicstack run: %v, want exit status 7\n%s", err, out)
	}
	for _, want := range []string{"[init -> first] received 10 replies\n", "[init] child \"first\" exited with exit value 0\n", "[init] exit value 7 of child \"last\" propagated"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(string(out), "[init -> first] received 10 replies"); n != 1 {
		t.Errorf("first ran %d times, want once (no restart):\n%s", n, out)
	}
}

// TestTestCommand: `nicstack test` runs the shipped Genode runtime files, one verdict line
// each, and fails (exit status 1) with the place of a pattern that never matched.
func TestTestCommand(t *testing.T) {
	for _, c := range []string{"test_echo", "test_client", "nic_perf", "nic_router", "nic_dump", "dynamic_rom", "report_rom", "test-nic_router_dhcp-manager", "test-nic_router_dhcp-client"} { // what the shipped files start
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	nicstack := filepath.Join(testutil.BinDir(t), "nicstack")
	shipped, _ := filepath.Glob("../../deploy/genode/*.runtime")
	if len(shipped) < 2 {
		t.Fatalf("deploy/genode has %d runtime files", len(shipped))
	}
	out, err := exec.Command(nicstack, append([]string{"test"}, shipped...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("succeeded: %d failed: 0", len(shipped))) {
		t.Errorf("nicstack test %v: %v\n%s", shipped, err, out)
	}
	for _, f := range shipped {
		if out, err := exec.Command(nicstack, "check", f).CombinedOutput(); err != nil || !strings.Contains(string(out), f+": ok") {
			t.Errorf("check %s: %v\n%s", f, err, out)
		}
	}

	b, _ := os.ReadFile("../../deploy/genode/test_echo_exit.runtime")
	never := filepath.Join(t.TempDir(), "never.runtime")
	os.WriteFile(never, bytes.Replace(bytes.Replace(b, []byte("received 200 replies"), []byte("received 201 replies"), 1), []byte("after_seconds: 30"), []byte("after_seconds: 2"), 1), 0o644)
	out, err = exec.Command(nicstack, "test", "--json", never).Output()
	var verdicts []struct{ Name, Result, Reason, Detail string }
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || json.Unmarshal(out, &verdicts) != nil || len(verdicts) != 1 {
		t.Fatalf("nicstack test --json of a failing package: %v\n%s", err, out)
	}
	v := verdicts[0]
	if v.Name != "never" || v.Result != "failed" || v.Reason != "timeout 2 sec" || !strings.Contains(v.Detail, never+`:7:3 never matched (stuck at "[client] received 201 replies")`) {
		t.Errorf("verdict %+v", v)
	}

	// An invalid router address: the router runs with the domain disabled, as Genode's does,
	// and says why at the attribute's place; the test fails naming the pattern's.
	b, _ = os.ReadFile("../../deploy/genode/nic_router_report.runtime")
	bad := filepath.Join(t.TempDir(), "badaddr.runtime")
	os.WriteFile(bad, bytes.Replace(bytes.Replace(b, []byte(`interface="10.0.1.1/24"`), []byte(`interface="10.0.1.300/24"`), 1), []byte(`after_seconds="30"`), []byte(`after_seconds="2"`), 1), 0o644)
	out, _ = exec.Command(nicstack, "test", bad).CombinedOutput()
	for _, want := range []string{bad + ":8:3 never matched", bad + `:34:28: attribute \"interface\" of <domain>: \"10.0.1.300/24\" is not an IPv4 prefix`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("nicstack test of an invalid router address lacks %q:\n%s", want, out)
		}
	}
}

// processesOf lists the live processes whose environment holds TMPDIR=tmp: a run's
// supervisor, components and the commands they started.
func processesOf(tmp string) []int {
	var pids []int
	envs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, e := range envs {
		b, err := os.ReadFile(e)
		pid, _ := strconv.Atoi(strings.Split(e, "/")[2])
		if err == nil && bytes.Contains(b, []byte("\x00TMPDIR="+tmp+"\x00")) && leftover.Alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// `nicstack run ... | head` stops the run as Ctrl-C does when head has gone, instead of dying
// of SIGPIPE with everything left behind.
func TestRunStopsWhenItsOutputIsGone(t *testing.T) {
	testutil.Binary(t, "github.com/nicstack/nicstack/components/test_echo")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/test_client")
	bin := testutil.BinDir(t)
	tmp := testutil.ReachableTempDir(t)
	socket := filepath.Join(tmp, "s.sock")
	sh := exec.Command("sh", "-c", fmt.Sprintf("%s run --socket %s ../../deploy/test_echo.xml 2>&1 | head -1",
		filepath.Join(bin, "nicstack"), socket))
	sh.Env = append(os.Environ(), "TMPDIR="+tmp)
	done := make(chan error, 1)
	go func() { done <- sh.Run() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		sh.Process.Kill()
		t.Fatal("the run did not end after head went")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(processesOf(tmp)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p := processesOf(tmp); len(p) > 0 {
		t.Errorf("processes of the run are left: %v", p)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "nicstack-run-*")); len(left) > 0 || fileExists(socket) {
		t.Errorf("the run left %v (socket there: %v)", left, fileExists(socket))
	}
}

func fileExists(path string) bool { _, err := os.Stat(path); return err == nil }

// A supervisor killed with SIGKILL cleans nothing; `nicstack cleanup`, and the next `nicstack
// run` (which cleans up first), remove what it left: the command still running inside one of
// its namespaces, the namespaces, its run folder and control socket.
func TestCleanupAfterAKilledRun(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "ip", "nsenter")
	t.Run("cleanup", func(t *testing.T) {
		r := killedRun(t)
		cleanup := exec.Command(filepath.Join(r.bin, "nicstack"), "cleanup")
		cleanup.Env = append(os.Environ(), "TMPDIR="+r.tmp)
		out, err := cleanup.CombinedOutput()
		if err != nil {
			t.Fatalf("cleanup: %v\n%s", err, out)
		}
		r.checkCleaned(t, string(out), "removed ")
	})
	t.Run("run again", func(t *testing.T) {
		r := killedRun(t)
		socket := filepath.Join(filepath.Dir(r.socket), "next.sock")
		next := exec.Command(filepath.Join(r.bin, "nicstack"), "run", "--socket", socket, "../../deploy/test_echo.xml")
		next.Env = append(os.Environ(), "TMPDIR="+r.tmp) // where the killed run left its folder
		var out testutil.SyncBuffer
		next.Stdout, next.Stderr = &out, &out
		if err := next.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if st, err := supervisor.QueryStatus(socket); err == nil && len(st.Components) == 2 {
				break
			}
			if time.Now().After(deadline) {
				next.Process.Kill()
				next.Wait()
				t.Fatalf("the next run never got ready:\n%s", out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		next.Process.Signal(os.Interrupt)
		if err := next.Wait(); err != nil {
			t.Errorf("the next run: %v", err)
		}
		r.checkCleaned(t, out.String(), "removed what a killed run left: ")
	})
}

// killedRun is a run as root with a namespace and a command in it, killed with SIGKILL.
func killedRun(t *testing.T) *nicstackRun {
	t.Helper()
	scenario := filepath.Join(t.TempDir(), "parent.xml")
	if err := os.WriteFile(scenario, []byte(`<config>
	<parent-provides> <service name="Tap"/> </parent-provides>
	<start name="tapper"> <binary name="test_client"/>
		<route> <service name="Tap"> <parent/> </service> </route>
		<config service="Tap" netns="a" exec="sleep 600 &amp; sleep 600"/> </start>
</config>`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startNicstack(t, scenario, func(st supervisor.Status) bool {
		return len(st.Components) == 1 && len(st.Components[0].Requests) == 1 && st.Components[0].Requests[0].State == "open"
	})
	r.pid = r.cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for len(processesOf(r.tmp)) < 4 && time.Now().Before(deadline) { // nicstack, test_client, sh, 2 sleeps
		time.Sleep(20 * time.Millisecond)
	}
	r.cmd.Process.Signal(syscall.SIGKILL)
	r.cmd.Wait()
	time.Sleep(200 * time.Millisecond) // Pdeathsig takes the component and the shell, not the sleeps
	if len(r.namespaces()) == 0 || len(processesOf(r.tmp)) == 0 || !fileExists(r.socket) {
		t.Fatalf("nothing was left to clean: namespaces %v, processes %v", r.namespaces(), processesOf(r.tmp))
	}
	return r
}

func (r *nicstackRun) namespaces() []string {
	ents, _ := filepath.Glob(fmt.Sprintf("/run/netns/nst%d-*", r.pid))
	return ents
}

// checkCleaned checks that out (of cleanup, or of the next run) says it removed each thing
// the killed run left, each line starting with prefix, and that nothing of it is left.
func (r *nicstackRun) checkCleaned(t *testing.T, out, prefix string) {
	t.Helper()
	pid := strconv.Itoa(r.pid)
	for _, want := range []string{prefix + "process ", prefix + "namespace nst" + pid + "-", "/nicstack-run-" + pid + "-", // in TMPDIR, or /tmp when TMPDIR is too long for sockets
		prefix + "control socket " + r.socket} {
		if !strings.Contains(out, want) {
			t.Errorf("it does not say %q:\n%s", want, out)
		}
	}
	if ns, p := r.namespaces(), processesOf(r.tmp); len(ns) > 0 || len(p) > 0 {
		t.Errorf("left: namespaces %v, processes %v", ns, p)
	}
	left, _ := filepath.Glob(filepath.Join(r.tmp, "nicstack-run-"+pid+"-*"))
	inTmp, _ := filepath.Glob("/tmp/nicstack-run-" + pid + "-*")
	if left = append(left, inTmp...); len(left) > 0 || fileExists(r.socket) {
		t.Errorf("left: run folders %v, control socket there: %v", left, fileExists(r.socket))
	}
}

// Every component runs with the least it needs: as root, the supervisor starts each as a
// user of its own without capabilities; every component sets no_new_privs and confines
// itself with a seccomp filter (package sandbox).
func TestComponentsRunConfined(t *testing.T) {
	r := startEcho(t)
	uids := map[string]bool{}
	for _, pid := range r.pids(t) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		status := map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && len(strings.Fields(v)) > 0 {
				status[k] = strings.Fields(v)[0]
			}
		}
		want := map[string]string{"CapEff": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}
		if os.Getuid() != 0 {
			want["Uid"] = strconv.Itoa(os.Getuid())
		} else if status["Uid"] == "0" {
			t.Errorf("pid %d runs as root", pid)
		}
		for k, v := range want {
			if status[k] != v {
				t.Errorf("pid %d: %s %s, want %s", pid, k, status[k], v)
			}
		}
		uids[status["Uid"]] = true
	}
	if os.Getuid() == 0 && len(uids) != 2 {
		t.Errorf("the two components share a uid: %v", uids)
	}
}
