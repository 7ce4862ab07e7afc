package component

// Pinned threads: a component serving several queues pins each queue's loop to one CPU of its
// affinity, but its sandbox refuses sched_setaffinity (a thread could leave the CPUs its
// placement gave it). The supervisor, whose placement it is, pins on its behalf, as Genode's
// parent gives a thread its place within the component's affinity space.
//
// On the control socket a PinThread is one message: pinID, the thread id, the index into the
// component's CPUs. The supervisor answers pinAnswer|tid with the errno as the count, 0 when
// the thread is pinned; a thread waits for its own answer, so several pin at once.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

const (
	pinID      = exitID - 2
	pinMsgSize = headerSize + 4
	pinAnswer  = 1 << 62 // with the tid: the supervisor's answer (session ids stay below)
	maxTID     = 1<<32 - 1
)

// PinThread has the supervisor pin the calling thread to CPU index of the component's affinity
// (modulo its size); the caller locks its goroutine to the thread first
// (runtime.LockOSThread). Outside a supervised process (a test's component) nothing is
// pinned.
func (c *Component) PinThread(index int) error {
	if c.control == nil {
		return nil
	}
	if index < 0 || index > maxTID {
		return fmt.Errorf("pinning to cpu index %d: out of range", index)
	}
	tid := unix.Gettid()
	msg := make([]byte, pinMsgSize)
	binary.LittleEndian.PutUint64(msg[:8], pinID)
	binary.LittleEndian.PutUint32(msg[8:], uint32(tid))
	binary.LittleEndian.PutUint32(msg[12:], uint32(index))
	if _, err := c.control.Write(msg); err != nil {
		return fmt.Errorf("pinning thread %d to cpu index %d: %w", tid, index, err)
	}
	errno, err := c.inbox.answer(pinAnswer|uint64(tid), filesTimeout)
	if err == nil && errno != 0 {
		err = unix.Errno(errno)
	}
	if err != nil {
		return fmt.Errorf("pinning thread %d to cpu index %d: %w", tid, index, err)
	}
	return nil
}

// ParsePinThread reads a message a component sent on its control socket: ok when msg is a
// PinThread, then the thread and the cpu index.
func ParsePinThread(msg []byte) (tid, index int, ok bool) {
	if len(msg) != pinMsgSize || binary.LittleEndian.Uint64(msg[:8]) != pinID {
		return 0, 0, false
	}
	return int(binary.LittleEndian.Uint32(msg[8:])), int(binary.LittleEndian.Uint32(msg[12:])), true
}

// PinAnswer is the supervisor's answer to tid's PinThread: err's errno (EINVAL for an error
// that carries none), or done.
func PinAnswer(tid int, err error) []byte {
	var errno unix.Errno
	if err != nil && !errors.As(err, &errno) {
		errno = unix.EINVAL
	}
	msg := binary.LittleEndian.AppendUint64(nil, pinAnswer|uint64(uint32(tid)))
	return binary.LittleEndian.AppendUint32(msg, uint32(errno))
}
