package component

// Kept descriptors: a component has the supervisor hold descriptors (a connection it serves,
// the memory and eventfds that came with it) for its next process, should this one die. The
// supervisor keeps them across a crash or kill -9, as it keeps the state region, hands them
// to the next process (KeptEnv) and lets them go at a deliberate stop. A component thus
// resumes a peer's connection that the peer never sees end (docs/vms.md).
//
// On the control socket a Keep is one message: keepID, the number of descriptors, the key,
// with the descriptors attached as SCM_RIGHTS.

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// KeptEnv lists the descriptors the supervisor kept for this process from the one before:
// one "KEY FD FD ..." a line.
const KeptEnv = "NICSTACK_KEPT"

// MaxKept bounds the descriptors of one key.
const MaxKept = 64

const (
	keepID      = exitID - 1
	keepMsgSize = headerSize + 4
)

// Keep has the supervisor hold fds under key for the component's next process, replacing
// what key held; none lets key's go. The descriptors stay the caller's. Outside a supervised
// process (a test's component) nothing is kept.
func (c *Component) Keep(key uint32, fds []int) error {
	if c.control == nil {
		return nil
	}
	if len(fds) > MaxKept {
		return fmt.Errorf("keeping %d descriptors under %d, at most %d", len(fds), key, MaxKept)
	}
	var msg [keepMsgSize]byte
	binary.LittleEndian.PutUint64(msg[:8], keepID)
	binary.LittleEndian.PutUint32(msg[8:], uint32(len(fds)))
	binary.LittleEndian.PutUint32(msg[12:], key)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := c.control.WriteMsgUnix(msg[:], oob, nil); err != nil {
		return fmt.Errorf("keeping descriptors under %d: %w", key, err)
	}
	return nil
}

// ParseKeep reads a message a component sent on its control socket with the descriptors
// received with it (files, which it takes): ok when msg is a Keep, then the key and the files
// to hold, or an error naming what is wrong (the files are closed then).
func ParseKeep(msg []byte, files []*os.File) (key uint32, kept []*os.File, ok bool, err error) {
	if len(msg) != keepMsgSize || binary.LittleEndian.Uint64(msg[:8]) != keepID {
		return 0, nil, false, nil
	}
	key = binary.LittleEndian.Uint32(msg[12:])
	if n := binary.LittleEndian.Uint32(msg[8:]); n != uint32(len(files)) || n > MaxKept {
		closeAll(files)
		return key, nil, true, fmt.Errorf("keep %d: announced %d descriptors, %d came (at most %d)", key, n, len(files), MaxKept)
	}
	return key, files, true, nil
}

var keptTaken sync.Map // key -> true: each key's descriptors are handed out once

// Kept hands over the descriptors the supervisor kept under key from the component's
// process before this one, once; nil when there are none.
func Kept(key uint32) []*os.File {
	for line := range strings.Lines(os.Getenv(KeptEnv)) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != strconv.FormatUint(uint64(key), 10) {
			continue
		}
		if _, taken := keptTaken.LoadOrStore(key, true); taken {
			return nil
		}
		var files []*os.File
		for _, s := range f[1:] {
			fd, err := strconv.Atoi(s)
			if err != nil || fd < 3 {
				continue
			}
			unix.CloseOnExec(fd)
			files = append(files, os.NewFile(uintptr(fd), "kept"))
		}
		return files
	}
	return nil
}
