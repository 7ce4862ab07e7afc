package supervisor

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/runtime/affinity"
)

// pinHelperEnv makes the test binary a fake child: a process with three threads of its own
// besides the Go runtime's, which says so and waits until its stdin closes.
const pinHelperEnv = "NICSTACK_PIN_HELPER"

func TestPinHelperProcess(t *testing.T) {
	if os.Getenv(pinHelperEnv) == "" {
		t.Skip("the fake child of TestPinThread")
	}
	for range 3 {
		go func() {
			runtime.LockOSThread()
			os.Stdin.Read(make([]byte, 1))
		}()
	}
	for len(tasks(os.Getpid())) < 4 {
		time.Sleep(time.Millisecond)
	}
	os.Stdout.WriteString("ready\n")
	os.Stdin.Read(make([]byte, 1))
	os.Exit(0)
}

// A component's PinThread reaches the exit watcher, which pins each thread of the child to
// the CPU its index names in the child's placement (modulo its size) and answers done; a
// thread of another process is refused with ESRCH and keeps its CPUs.
func TestPinThread(t *testing.T) {
	own, err := affinity.Current()
	if err != nil {
		t.Fatal(err)
	}
	cpus := affinity.Set{own[len(own)-1], own[0]} // index 0 is not the first CPU
	helper := exec.Command(os.Args[0], "-test.run=^TestPinHelperProcess$")
	helper.Env = append(os.Environ(), pinHelperEnv+"=1")
	in, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer helper.Wait()
	defer in.Close()
	if _, err := out.Read(make([]byte, 8)); err != nil {
		t.Fatalf("the fake child did not start: %v", err)
	}

	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sp[1])
	f := os.NewFile(uintptr(sp[0]), "control")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{sock: conn.(*net.UnixConn), pid: helper.Process.Pid, cpus: cpus}
	ended := make(chan struct{})
	p.watchExit(func(int, bool) { close(ended) }, func(uint32, []byte, []*os.File, error) { t.Error("a Keep") })
	defer func() { unix.Shutdown(sp[1], unix.SHUT_RDWR); <-ended }()

	pin := func(tid, index int) unix.Errno {
		msg := binary.LittleEndian.AppendUint64(nil, ^uint64(0)-2)
		msg = binary.LittleEndian.AppendUint32(msg, uint32(tid))
		msg = binary.LittleEndian.AppendUint32(msg, uint32(index))
		if _, err := unix.Write(sp[1], msg); err != nil {
			t.Fatal(err)
		}
		answer := make([]byte, 64)
		n, err := unix.Read(sp[1], answer)
		if err != nil || n != 12 || binary.LittleEndian.Uint64(answer) != 1<<62|uint64(tid) {
			t.Fatalf("pinning %d: answer % x, %v", tid, answer[:n], err)
		}
		return unix.Errno(binary.LittleEndian.Uint32(answer[8:]))
	}
	for i, tid := range tasks(p.pid) {
		if errno := pin(tid, i); errno != 0 {
			t.Fatalf("pinning thread %d to index %d: %v", tid, i, errno)
		}
		var m unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &m); err != nil {
			t.Fatal(err)
		}
		if want := cpus[i%len(cpus)]; m.Count() != 1 || !m.IsSet(want) {
			t.Errorf("thread %d (index %d) has %d cpus, want cpu %d alone", tid, i, m.Count(), want)
		}
	}

	foreign := unix.Gettid()
	var before, after unix.CPUSet
	unix.SchedGetaffinity(foreign, &before)
	if errno := pin(foreign, 0); !errors.Is(errno, unix.ESRCH) {
		t.Fatalf("a thread of the supervisor's own process: %v, want ESRCH", errno)
	}
	if errno := pin(0, 0); !errors.Is(errno, unix.ESRCH) {
		t.Fatalf("thread 0 (the caller): %v, want ESRCH", errno)
	}
	unix.SchedGetaffinity(foreign, &after)
	if before != after {
		t.Fatal("a refused PinThread moved the thread")
	}
}

// tasks are the thread ids of process pid.
func tasks(pid int) []int {
	entries, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	var tids []int
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids
}
