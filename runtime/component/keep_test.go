package component

import (
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Keep sends its descriptors under the key as one message that ParseKeep reads back; an empty
// Keep lets the key go.
func TestKeepMessage(t *testing.T) {
	conn, peer := controlPair(t)
	c := &Component{control: conn}
	efd, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
	defer unix.Close(efd)
	for _, fds := range [][]int{{efd, efd, efd}, nil} {
		if err := c.Keep(42, []byte("record"), fds); err != nil {
			t.Fatal(err)
		}
		buf, oob := make([]byte, MaxKeepMessage), make([]byte, unix.CmsgSpace(4*MaxKept))
		n, oobn, _, _, err := unix.Recvmsg(peer, buf, oob, 0)
		if err != nil {
			t.Fatal(err)
		}
		files, err := ReceivedFiles(oob[:oobn], "kept")
		if err != nil {
			t.Fatal(err)
		}
		key, data, kept, ok, err := ParseKeep(buf[:n], files)
		if !ok || err != nil || key != 42 || string(data) != "record" || len(kept) != len(fds) {
			t.Fatalf("ParseKeep: key %d, %q, %d files, %v %v; want 42, \"record\", %d", key, data, len(kept), ok, err, len(fds))
		}
		closeAll(kept)
	}
	if _, _, _, ok, _ := ParseKeep(make([]byte, headerSize), nil); ok {
		t.Fatal("an exit message parsed as a Keep")
	}
}

// controlPair is a component's control socket and the supervisor's end of it (a descriptor),
// both closed when the test ends.
func controlPair(t *testing.T) (*net.UnixConn, int) {
	t.Helper()
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(sp[1]) })
	f := os.NewFile(uintptr(sp[0]), "control")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn.(*net.UnixConn), sp[1]
}
