package component

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// SocketsEnv tells a component which listening sockets the supervisor bound for it (its
// Spec's Sockets) and handed over as descriptors: one "FD PATH" a line, PATH as its config
// names it.
const SocketsEnv = "NICSTACK_SOCKETS"

var listenersTaken sync.Map // path -> true: each socket is handed out once

// Listener returns the Unix socket the supervisor listens on at path for this component (a
// path its Spec's Sockets lists), which the component accepts on without the right to create
// a socket there itself.
func Listener(path string) (*net.UnixListener, error) {
	for line := range strings.Lines(os.Getenv(SocketsEnv)) {
		fdText, p, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if !ok || p != path {
			continue
		}
		if _, taken := listenersTaken.LoadOrStore(path, true); taken {
			return nil, fmt.Errorf("socket %s: already taken", path)
		}
		fd, err := strconv.Atoi(fdText)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", SocketsEnv, line, err)
		}
		f := os.NewFile(uintptr(fd), path)
		defer f.Close()
		ln, err := net.FileListener(f)
		if err != nil {
			return nil, fmt.Errorf("socket %s (fd %d): %w", path, fd, err)
		}
		ul, ok := ln.(*net.UnixListener)
		if !ok {
			ln.Close()
			return nil, fmt.Errorf("socket %s (fd %d) is not a Unix socket", path, fd)
		}
		return ul, nil
	}
	return nil, fmt.Errorf("socket %s: the supervisor handed no such socket (does the component's Spec list it?)", path)
}
