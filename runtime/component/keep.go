package component

// Kept descriptors: a component has the supervisor hold descriptors (a connection it serves,
// the memory and eventfds that came with it) and a few bytes saying what they are for its
// next process, should this one die. The supervisor keeps them across a crash or kill -9, as
// it keeps the state region, hands them to the next process (KeptEnv) and lets them go at a
// deliberate stop. A component thus resumes a peer's connection that the peer never sees end
// (docs/vms.md).
//
// On the control socket a Keep is one message: keepID, the number of descriptors, the key,
// then the bytes, with the descriptors attached as SCM_RIGHTS. The next process gets the
// bytes as the first descriptor of the key, a sealed memfd the supervisor makes of the bytes
// it holds.

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
// one "KEY DATA FD ..." a line, DATA the memfd holding the bytes.
const KeptEnv = "NICSTACK_KEPT"

// MaxKept bounds the descriptors of one key, MaxKeptData its bytes. A vhost-user vm of 16
// queue pairs keeps 109 descriptors: its connection, up to 8 memory regions, 3 eventfds for
// each of 33 rings and the inflight region (the kernel passes at most 253 with one message).
const (
	MaxKept     = 128
	MaxKeptData = 16 << 10
)

// MaxKeepMessage is the largest message a Keep sends.
const MaxKeepMessage = keepMsgSize + MaxKeptData

const (
	keepID      = exitID - 1
	keepMsgSize = headerSize + 4
)

// Keep has the supervisor hold data and fds under key for the component's next process,
// replacing what key held; no descriptors let key's go. The descriptors stay the caller's.
// Outside a supervised process (a test's component) nothing is kept.
func (c *Component) Keep(key uint32, data []byte, fds []int) error {
	if c.control == nil {
		return nil
	}
	if len(fds) > MaxKept || len(data) > MaxKeptData {
		return fmt.Errorf("keeping %d descriptors and %d bytes under %d, at most %d and %d", len(fds), len(data), key, MaxKept, MaxKeptData)
	}
	msg := make([]byte, keepMsgSize, keepMsgSize+len(data))
	binary.LittleEndian.PutUint64(msg[:8], keepID)
	binary.LittleEndian.PutUint32(msg[8:], uint32(len(fds)))
	binary.LittleEndian.PutUint32(msg[12:], key)
	msg = append(msg, data...)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := c.control.WriteMsgUnix(msg, oob, nil); err != nil {
		return fmt.Errorf("keeping descriptors under %d: %w", key, err)
	}
	return nil
}

// ParseKeep reads a message a component sent on its control socket with the descriptors
// received with it (files, which it takes): ok when msg is a Keep, then the key, the bytes
// (a copy) and the files to hold, or an error naming what is wrong (the files are closed
// then).
func ParseKeep(msg []byte, files []*os.File) (key uint32, data []byte, kept []*os.File, ok bool, err error) {
	if len(msg) < keepMsgSize || len(msg) > MaxKeepMessage || binary.LittleEndian.Uint64(msg[:8]) != keepID {
		return 0, nil, nil, false, nil
	}
	key = binary.LittleEndian.Uint32(msg[12:])
	if n := binary.LittleEndian.Uint32(msg[8:]); n != uint32(len(files)) || n > MaxKept {
		closeAll(files)
		return key, nil, nil, true, fmt.Errorf("keep %d: announced %d descriptors, %d came (at most %d)", key, n, len(files), MaxKept)
	}
	return key, append([]byte(nil), msg[keepMsgSize:]...), files, true, nil
}

var keptTaken sync.Map // key -> true: each key's descriptors are handed out once

// Kept hands over the bytes and descriptors the supervisor kept under key from the
// component's process before this one, once; no files when there are none.
func Kept(key uint32) (data []byte, files []*os.File, err error) {
	for line := range strings.Lines(os.Getenv(KeptEnv)) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != strconv.FormatUint(uint64(key), 10) {
			continue
		}
		if _, taken := keptTaken.LoadOrStore(key, true); taken {
			return nil, nil, nil
		}
		for _, s := range f[1:] {
			fd, err := strconv.Atoi(s)
			if err != nil || fd < 3 {
				closeAll(files)
				return nil, nil, fmt.Errorf("%s: %q is no descriptor", KeptEnv, s)
			}
			unix.CloseOnExec(fd)
			files = append(files, os.NewFile(uintptr(fd), "kept"))
		}
		if len(files) == 0 {
			return nil, nil, fmt.Errorf("%s: key %d without its data", KeptEnv, key)
		}
		data, err := readKeptData(files[0])
		files[0].Close()
		if err != nil {
			closeAll(files[1:])
			return nil, nil, err
		}
		return data, files[1:], nil
	}
	return nil, nil, nil
}

// readKeptData reads the memfd the supervisor made of a key's bytes.
func readKeptData(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("kept data: %w", err)
	}
	if !st.Mode().IsRegular() || st.Size() > MaxKeptData {
		return nil, fmt.Errorf("kept data: not a file of at most %d bytes", MaxKeptData)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("kept data: %w", err)
	}
	return b, nil
}
