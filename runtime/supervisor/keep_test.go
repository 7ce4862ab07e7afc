package supervisor

import (
	"encoding/binary"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/runtime/component"
)

// A component's Keep message reaches the supervisor's exit watcher in order with its
// descriptors; the child holds them across launches, each launch gets copies named in
// component.KeptEnv, and closeKept lets them go.
func TestKeptDescriptorsOutliveTheProcess(t *testing.T) {
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(sp[0]), "control")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{sock: conn.(*net.UnixConn)}
	type keptMsg struct {
		key   uint32
		data  []byte
		files []*os.File
	}
	got := make(chan keptMsg, 4)
	ended := make(chan bool)
	p.watchExit(func(int, bool) { close(ended) }, func(key uint32, data []byte, files []*os.File, err error) {
		if err != nil {
			t.Error(err)
		}
		got <- keptMsg{key, data, files}
	})
	efd, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
	msg := binary.LittleEndian.AppendUint64(nil, ^uint64(0)-1)
	msg = binary.LittleEndian.AppendUint32(msg, 2)
	msg = binary.LittleEndian.AppendUint32(msg, 7)
	msg = append(msg, "record"...)
	if err := unix.Sendmsg(sp[1], msg, unix.UnixRights(efd, efd), nil, 0); err != nil {
		t.Fatal(err)
	}
	unix.Close(efd)
	unix.Close(sp[1]) // the process dies
	k := <-got
	<-ended
	if k.key != 7 || string(k.data) != "record" || len(k.files) != 2 {
		t.Fatalf("kept %q and %d files under %d", k.data, len(k.files), k.key)
	}

	c := &child{start: &Start{Name: "vm"}}
	c.keep(k.key, k.data, k.files)
	for range 2 { // two launches: the child's files stay
		l, err := c.keptForLaunch()
		if err != nil {
			t.Fatal(err)
		}
		if env := l.env(5); env != component.KeptEnv+"=7 5 6 7" || len(l.files) != 3 {
			t.Fatalf("env %q, %d files", env, len(l.files))
		}
		data := make([]byte, 16)
		if n, _ := l.files[0].ReadAt(data, 0); string(data[:n]) != "record" {
			t.Fatalf("the data file holds %q", data[:n])
		}
		if _, err := l.files[0].Write([]byte("x")); err == nil {
			t.Fatal("the next process could write the data file")
		}
		signalFD(t, l.files[1])
		l.close()
	}
	var count [8]byte
	if _, err := unix.Read(int(k.files[1].Fd()), count[:]); err != nil || binary.LittleEndian.Uint64(count[:]) != 2 {
		t.Fatalf("the kept eventfd is not the one sent: %v % x", err, count)
	}
	c.keep(7, nil, nil)
	if l, _ := c.keptForLaunch(); l.env(3) != "" {
		t.Fatalf("an empty Keep left %q", l.env(3))
	}
	c.keep(1, nil, []*os.File{os.NewFile(uintptr(dupFD(t, 0)), "x")})
	(&Supervisor{}).closeKept(c)
	if l, _ := c.keptForLaunch(); len(l.files) != 0 || c.keptFiles != nil {
		t.Fatal("closeKept left kept descriptors")
	}
}

func signalFD(t *testing.T, f *os.File) {
	if _, err := unix.Write(int(f.Fd()), binary.LittleEndian.AppendUint64(nil, 1)); err != nil {
		t.Fatal(err)
	}
}

func dupFD(t *testing.T, fd int) int {
	n, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
