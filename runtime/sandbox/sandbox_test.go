package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The confined side runs in a child process (a filter cannot be taken off again): the test
// binary started again with sandboxChild set.
const sandboxChild = "NICSTACK_SANDBOX_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(sandboxChild); dir != "" {
		confinedChild(dir)
		return
	}
	os.Exit(m.Run())
}

// confinedChild confines itself, tries what a component must and must not do, prints one
// line per try, then waits for its stdin to close (so the parent can read its
// /proc/PID/status meanwhile).
func confinedChild(dir string) {
	// Busy threads, which make it likelier that a goroutine moves between threads: Confine
	// must set no_new_privs and install the filter on one thread (the kernel refuses the
	// filter with EACCES otherwise, as a component once did 1 in ~50 launches in CI).
	for range 4 {
		go func() {
			for {
				unix.Getpid()
				runtime.Gosched()
			}
		}()
	}
	runtime.Gosched()
	if err := Confine(); err != nil {
		fmt.Println("confine:", err)
		os.Exit(1)
	}
	try := func(what string, err error) { fmt.Printf("%s: %v\n", what, err == nil) }
	_, err := os.Open("/etc/hostname")
	fmt.Println("open host file refused:", errors.Is(err, unix.EPERM))
	_, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	fmt.Println("inet socket refused:", errors.Is(err, unix.EPERM))
	fmt.Println("new process refused:", exec.Command("/bin/true").Run() != nil)
	l, err := net.Listen("unix", filepath.Join(dir, "s"))
	try("unix listen works", err)
	if err == nil {
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Write([]byte("x"))
				c.Close()
			}
		}()
		c, err := net.Dial("unix", filepath.Join(dir, "s"))
		if err == nil {
			b := make([]byte, 1)
			_, err = c.Read(b)
		}
		try("unix dial works", err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ { // new threads: goroutines blocked in system calls
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(10 * time.Millisecond)
			unix.Nanosleep(&unix.Timespec{Nsec: 1e6}, nil)
		}()
	}
	wg.Wait()
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err == nil {
		unix.Close(fd)
	}
	try("threads and eventfd work", err)
	fd, err = unix.MemfdCreate("region", unix.MFD_CLOEXEC)
	if err == nil {
		unix.Close(fd)
	}
	try("memfd works", err)
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
}

func TestConfine(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), sandboxChild+"="+t.TempDir())
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
		lines = append(lines, sc.Text())
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("the confined process's status lacks %q", want)
		}
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, ": true") {
			t.Errorf("%s", l)
		}
	}
	if len(lines) != 7 {
		t.Errorf("the child said %q", lines)
	}
}
