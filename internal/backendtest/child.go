package backendtest

import (
	"bytes"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/netns"
)

const childEnv = "NICSTACK_BACKENDTEST_CHILD"

// InChild reports whether this test binary runs as the unprivileged child of RunUnprivileged.
func InChild() bool { return os.Getenv(childEnv) == "1" }

// RunUnprivileged starts this test binary again as user nobody, with no capabilities, running
// only test name, with files as descriptors 3, 4, ... (as the supervisor hands a back end's
// descriptor to a component). The test checks InChild to play the child's part.
func RunUnprivileged(t *testing.T, name string, files ...*os.File) *exec.Cmd {
	t.Helper()
	// The go tool's build folder is private to root: run a copy from a folder nobody can enter.
	dir, err := os.MkdirTemp("", "nicstack-child-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "child.test")
	if err := copyFile(self, bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^"+name+"$", "-test.v")
	cmd.Env = []string{childEnv + "=1", "PATH=/usr/bin:/bin"}
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("child output:\n%s", out.String())
		}
	})
	return cmd
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// EchoPort is the UDP port whose datagrams Echo sends back.
const EchoPort = 7400

// Echo reads from dev until a UDP datagram to EchoPort arrives and writes it back with
// addresses and ports swapped: the child's part of an unprivileged test.
func Echo(t *testing.T, dev netdev.Device, maxFrame int) {
	bufs, sizes, offs := [][]byte{make([]byte, maxFrame)}, make([]int, 1), make([]netdev.Offload, 1)
	for {
		n, err := dev.Read(bufs, sizes, offs)
		if err != nil {
			t.Fatal(err)
		}
		// Parse completes a partial checksum in place; swapping both ends keeps the sums valid.
		p, ok := Parse(bufs[0][:sizes[0]], offs[0])
		if n != 1 || !ok || p.Proto != header.ProtoUDP || p.DPort != EchoPort {
			continue
		}
		f := p.Frame
		swap(f[0:6], f[6:12])
		swap(f[header.EthLen+12:header.EthLen+16], f[header.EthLen+16:header.EthLen+20])
		swap(f[l4Start:l4Start+2], f[l4Start+2:l4Start+4])
		if _, err := dev.Write([][]byte{f}, nil); err != nil {
			t.Fatal(err)
		}
		return
	}
}

func swap(a, b []byte) {
	for i := range a {
		a[i], b[i] = b[i], a[i]
	}
}

// ExpectEcho sends a datagram from the kernel of n to EchoPort of the host behind the back end
// (path.Src), resending until the echo arrives or 5 s pass.
func ExpectEcho(t *testing.T, n *netns.NS, path Path) {
	t.Helper()
	c, err := ListenUDP(n, path.Dst.IP, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(path.Src.IP, EchoPort))
	buf := make([]byte, 64)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if _, err := c.WriteTo([]byte("echo?"), to); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if k, from, err := c.ReadFromUDPAddrPort(buf); err == nil {
			if string(buf[:k]) != "echo?" || from.Port() != EchoPort {
				t.Fatalf("echo %q from %v", buf[:k], from)
			}
			return
		}
	}
	t.Fatal("no echo from the unprivileged child")
}
