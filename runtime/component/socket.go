package component

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The control socket carries one message per session: an 8-byte session id and a 4-byte file
// count, with the files attached as SCM_RIGHTS. A file descriptor is the capability: a
// component only ever holds the files of sessions routed to it.
//
// The other way, a component that calls Exit sends one message right before it ends: the id
// no session has (exitID) and its exit value as a signed 4-byte number, so that the
// supervisor sees the whole value (the process's exit status keeps 8 bits of it).
const (
	headerSize = 12
	maxFiles   = 16
	exitID     = ^uint64(0)
)

func sendExit(sock *net.UnixConn, value int) error {
	var msg [headerSize]byte
	binary.LittleEndian.PutUint64(msg[:8], exitID)
	binary.LittleEndian.PutUint32(msg[8:], uint32(int32(value)))
	_, err := sock.Write(msg[:])
	return err
}

// ParseExit reads a message a component sent on its control socket: the exit value it
// reports, if msg is that message.
func ParseExit(msg []byte) (int, bool) {
	if len(msg) != headerSize || binary.LittleEndian.Uint64(msg[:8]) != exitID {
		return 0, false
	}
	return int(int32(binary.LittleEndian.Uint32(msg[8:]))), true
}

// SendFiles sends the files of session id over sock.
func SendFiles(sock *net.UnixConn, id uint64, files []*os.File) error {
	if len(files) == 0 || len(files) > maxFiles {
		return fmt.Errorf("session %d: %d files, want 1 to %d", id, len(files), maxFiles)
	}
	var hdr [headerSize]byte
	binary.LittleEndian.PutUint64(hdr[:8], id)
	binary.LittleEndian.PutUint32(hdr[8:], uint32(len(files)))
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	n, oobn, err := sock.WriteMsgUnix(hdr[:], unix.UnixRights(fds...), nil)
	if err != nil {
		return fmt.Errorf("session %d: sending files: %w", id, err)
	}
	if n != headerSize || oobn == 0 {
		return fmt.Errorf("session %d: short write on control socket", id)
	}
	return nil
}

// fileInbox collects files arriving on the control socket until OpenSession claims them, and
// the supervisor's answers to PinThread until the caller takes them.
type fileInbox struct {
	mu      sync.Mutex
	cond    *sync.Cond
	files   map[uint64][]*os.File
	answers map[uint64]uint32 // by pinAnswer|tid: the errno, 0 for done
	closed  error
}

func newFileInbox() *fileInbox {
	b := &fileInbox{files: map[uint64][]*os.File{}, answers: map[uint64]uint32{}}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// receive reads sock until it fails (the supervisor went away) and returns that error.
func (b *fileInbox) receive(sock *net.UnixConn) error {
	hdr := make([]byte, headerSize)
	oob := make([]byte, unix.CmsgSpace(maxFiles*4))
	for {
		n, oobn, flags, _, err := sock.ReadMsgUnix(hdr, oob)
		if err == nil && n == 0 {
			err = fmt.Errorf("control socket closed")
		}
		if err == nil && (n != headerSize || flags&unix.MSG_CTRUNC != 0) {
			err = fmt.Errorf("control socket: malformed message (%d bytes, flags %#x)", n, flags)
		}
		id := binary.LittleEndian.Uint64(hdr[:8])
		if err == nil && oobn == 0 && id&^maxTID == pinAnswer {
			b.mu.Lock()
			b.answers[id] = binary.LittleEndian.Uint32(hdr[8:])
			b.cond.Broadcast()
			b.mu.Unlock()
			continue
		}
		var files []*os.File
		if err == nil {
			files, err = ReceivedFiles(oob[:oobn], "session")
		}
		if err == nil && binary.LittleEndian.Uint32(hdr[8:]) != uint32(len(files)) {
			err = fmt.Errorf("control socket: session %d announced %d files, got %d", id, binary.LittleEndian.Uint32(hdr[8:]), len(files))
		}
		b.mu.Lock()
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			b.closed = err
			b.cond.Broadcast()
			b.mu.Unlock()
			return err
		}
		for _, f := range b.files[id] { // a stale delivery nobody claimed
			f.Close()
		}
		b.files[id] = files
		b.cond.Broadcast()
		b.mu.Unlock()
	}
}

// ReceivedFiles are the descriptors an SCM_RIGHTS message carried in oob, close-on-exec, as
// files called name; a control message that is not SCM_RIGHTS is skipped.
func ReceivedFiles(oob []byte, name string) ([]*os.File, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
			files = append(files, os.NewFile(uintptr(fd), name))
		}
	}
	return files, nil
}

// take waits up to timeout for the files of session id and hands them over.
func (b *fileInbox) take(id uint64, want int, timeout time.Duration) ([]*os.File, error) {
	var files []*os.File
	err := b.await(timeout, func() (ok bool) {
		files, ok = b.files[id]
		delete(b.files, id)
		return ok
	})
	if err != nil {
		return nil, fmt.Errorf("session %d: %w", id, err)
	}
	if len(files) != want {
		closeAll(files)
		return nil, fmt.Errorf("session %d: got %d files, the request said %d", id, len(files), want)
	}
	return files, nil
}

// answer waits up to timeout for the supervisor's answer id and hands it over.
func (b *fileInbox) answer(id uint64, timeout time.Duration) (uint32, error) {
	var errno uint32
	err := b.await(timeout, func() (ok bool) {
		errno, ok = b.answers[id]
		delete(b.answers, id)
		return ok
	})
	return errno, err
}

// await waits up to timeout until got, called with mu held, finds what it waits for.
func (b *fileInbox) await(timeout time.Duration, got func() bool) error {
	deadline := time.Now().Add(timeout)
	stop := time.AfterFunc(timeout, func() { b.mu.Lock(); b.cond.Broadcast(); b.mu.Unlock() })
	defer stop.Stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if got() {
			return nil
		}
		if b.closed != nil {
			return b.closed
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing arrived on the control socket within %v", timeout)
		}
		b.cond.Wait()
	}
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
