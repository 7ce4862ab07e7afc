package supervisor

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/nicstack/nicstack/runtime/component"
)

// boundSocket is a Unix socket the supervisor listens on for a component (Spec.Sockets): it
// lives for the run, so that a peer (QEMU) finds it before the component starts and across
// its restarts, and each life of the component gets its descriptor.
type boundSocket struct {
	name string // as the config names it
	path string // where it is bound
	file *os.File
}

// socketsOf binds the sockets st's config names, once for the run, and returns them.
func (s *Supervisor) socketsOf(st *Start) ([]*boundSocket, error) {
	if s.opts.Components == nil || st.Config == nil || st.parsed == nil {
		return nil, nil
	}
	spec, err := s.opts.Components.Lookup(st.Binary)
	if err != nil || spec.Sockets == nil {
		return nil, nil
	}
	var out []*boundSocket
	for _, name := range spec.Sockets(st.parsed) {
		key := st.Name + "\x00" + name
		b := s.sockets[key]
		if b == nil {
			if b, err = bindSocket(name, s.opts.RunDir); err != nil {
				return nil, fmt.Errorf("%s: socket %s of %s: %w", st.Node.Pos, name, st.Name, err)
			}
			if g, ok := s.ids.programGroup(); ok {
				// The program that connects (QEMU) runs in this group; the listening component
				// has the descriptor, and needs no access to the file.
				if err := shareSocket(b.path, g); err != nil {
					b.file.Close()
					os.Remove(b.path)
					return nil, fmt.Errorf("%s: socket %s of %s: %w", st.Node.Pos, name, st.Name, err)
				}
			}
			s.sockets[key] = b
			s.log.Info(fmt.Sprintf("%s: listening on %s", st.Name, b.path))
		}
		out = append(out, b)
	}
	return out, nil
}

// bindSocket listens at name (relative: in runDir). A socket file left by an earlier run,
// that nothing listens on any more, is replaced; anything else there is refused.
func bindSocket(name, runDir string) (*boundSocket, error) {
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(runDir, name)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: something listens there already", path)
		} else if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, err
		}
		os.Remove(path)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	f, err := ln.File()
	ln.Close()
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	return &boundSocket{name: name, path: path, file: f}, nil
}

// shareSocket gives the socket at path to group g, which may connect; what others may is
// left as the supervisor's umask made it (an external QEMU of another user connects when it
// lets them write).
func shareSocket(path string, g uint32) error {
	if err := os.Chown(path, -1, int(g)); err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.Chmod(path, fi.Mode().Perm()|0o060)
}

// socketFiles are st's sockets as extra files of its process, from fd first on, and the
// line of SocketsEnv that names them.
func socketFiles(socks []*boundSocket, first int) (files []*os.File, env string) {
	var lines []string
	for i, b := range socks {
		files = append(files, b.file)
		lines = append(lines, strconv.Itoa(first+i)+" "+b.name)
	}
	if len(lines) == 0 {
		return nil, ""
	}
	return files, component.SocketsEnv + "=" + strings.Join(lines, "\n")
}

// closeSockets ends the run's sockets and removes their files.
func (s *Supervisor) closeSockets() { s.closeSocketsOf("") }

// closeSocketsOf ends the sockets of the start name ("": of every start) and removes their
// files: a start removed from the scenario (a detached guest) leaves no socket that nothing
// serves any more.
func (s *Supervisor) closeSocketsOf(name string) {
	for k, b := range s.sockets {
		if name == "" || strings.HasPrefix(k, name+"\x00") {
			b.file.Close()
			os.Remove(b.path)
			delete(s.sockets, k)
		}
	}
}
