package component

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// PinThread sends the calling thread and the index as one message that ParsePinThread reads
// back, and returns the supervisor's answer to that thread: done, or the errno it sent.
func TestPinThreadMessage(t *testing.T) {
	conn, peer := controlPair(t)
	c := &Component{control: conn, inbox: newFileInbox()}
	received := make(chan error, 1)
	go func() { received <- c.inbox.receive(c.control) }()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, answer := range []error{nil, unix.ESRCH} {
		done := make(chan error, 1)
		go func() {
			buf := make([]byte, MaxKeepMessage)
			n, err := unix.Read(peer, buf)
			if err != nil {
				done <- err
				return
			}
			tid, index, ok := ParsePinThread(buf[:n])
			if !ok || index != 3 {
				t.Errorf("ParsePinThread: tid %d, index %d, %v; want index 3", tid, index, ok)
			}
			_, err = unix.Write(peer, PinAnswer(tid, answer))
			done <- err
		}()
		err := c.PinThread(3)
		if werr := <-done; werr != nil {
			t.Fatal(werr)
		}
		if answer == nil && err != nil || answer != nil && !errors.Is(err, unix.ESRCH) {
			t.Fatalf("PinThread answered %v: %v", answer, err)
		}
	}
	if _, _, ok := ParsePinThread(binary.LittleEndian.AppendUint64(make([]byte, 0, keepMsgSize), keepID)[:keepMsgSize]); ok {
		t.Fatal("a Keep parsed as a PinThread")
	}
	conn.Close()
	<-received
}
