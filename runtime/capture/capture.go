// Package capture is how `nicstack capture` taps a session of a running scenario: the wire
// format on the capture socket (one SOCK_SEQPACKET message per batch of one endpoint: a header
// naming the session and direction, then pcap records), the Tap a component sets on a
// session's endpoints to write it, and the reading of it. It moves copies only: it never holds
// up the endpoint it taps (a full socket loses the batch, counted), and knows nothing of the
// supervisor or the command.
package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/runtime/pcap"
)

// Message header, little-endian:
//
//	0   magic "NSC1"
//	4   direction: 1 in (frames the tapping component got), 2 out (frames it sent)
//	5   three bytes of zero
//	8   session id
//	16  frames this tap has lost so far (the socket was full)
//	24  pcap records (pcap.AppendRecord), at least one
const (
	HeaderLen = 24
	magic     = 0x3143534e // "NSC1"
)

// MaxMessage bounds a message: a Unix socket takes a datagram of up to its send buffer
// (some 200 KiB by default), and a few of them should fit at once.
const MaxMessage = 64 << 10

// Snaplen is the most bytes of a frame a message keeps: one record fills a message.
const Snaplen = MaxMessage - HeaderLen - pcap.RecordHeaderLen

// Direction says which way the frames of a message went, seen from the tapping component.
type Direction uint8

const (
	In  Direction = 1 // the component got them from the session's peer
	Out Direction = 2 // the component sent them to the peer
)

func (d Direction) String() string {
	switch d {
	case In:
		return "in"
	case Out:
		return "out"
	}
	return fmt.Sprintf("direction(%d)", uint8(d))
}

// Pair returns the two ends of a new capture socket: the reader keeps ours (reads on it take
// deadlines), the component gets theirs. Theirs asks for a send buffer of 4 MiB (past the system's limit only for
// root), so that bursts wait in the socket rather than being lost.
func Pair() (ours, theirs *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("capture socket: %w", err)
	}
	// Ours non-blocking: os.File then waits in Go's poller and takes read deadlines.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("capture socket: %w", err)
	}
	if unix.SetsockoptInt(fds[1], unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20) != nil {
		unix.SetsockoptInt(fds[1], unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	}
	return os.NewFile(uintptr(fds[0]), "capture"), os.NewFile(uintptr(fds[1]), "capture"), nil
}

// Tap is a packetstream.Tap that writes the frames of one endpoint of one session to a
// capture socket: a message per batch, sent without waiting. Its methods run on the
// endpoint's goroutine; the socket may be closed from another one at any time (the tap then
// goes quiet).
type Tap struct {
	rc     syscall.RawConn
	buf    []byte // the message being filled: header, then records
	frames int    // records in buf
	lost   uint64
	dead   bool // the socket failed for good: the reader went away
	send   func(fd uintptr) bool
	err    error // send's result
}

// NewTap returns a tap that writes what it sees of session's frames going dir to sock.
func NewTap(sock *os.File, session uint64, dir Direction) (*Tap, error) {
	rc, err := sock.SyscallConn()
	if err != nil {
		return nil, err
	}
	t := &Tap{rc: rc, buf: make([]byte, HeaderLen, MaxMessage)}
	le := binary.LittleEndian
	le.PutUint32(t.buf[0:], magic)
	t.buf[4] = byte(dir)
	le.PutUint64(t.buf[8:], session)
	// Built once: a closure made per send would be an allocation per batch.
	t.send = func(fd uintptr) bool {
		_, t.err = unix.SendmsgN(int(fd), t.buf, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		return true
	}
	return t, nil
}

// Frame adds a copy of frame, seen now, to the batch's message (sending the message first
// when it is full).
func (t *Tap) Frame(frame []byte) {
	if t.dead {
		return
	}
	if len(t.buf)+pcap.RecordLen(frame, Snaplen) > cap(t.buf) {
		t.Flush()
	}
	t.buf = pcap.AppendRecord(t.buf, time.Now(), frame, Snaplen)
	t.frames++
}

// Flush sends the batch's message. A full socket loses it (counted in the next message); a
// socket whose reader is gone ends the tap.
func (t *Tap) Flush() {
	if t.frames == 0 || t.dead {
		return
	}
	binary.LittleEndian.PutUint64(t.buf[16:], t.lost)
	if err := t.rc.Write(t.send); err != nil {
		t.err = err // the socket was closed here: the capture ended
	}
	switch {
	case t.err == nil:
	case errors.Is(t.err, unix.EAGAIN) || errors.Is(t.err, unix.ENOBUFS):
		t.lost += uint64(t.frames)
	default:
		t.dead = true
	}
	t.buf, t.frames = t.buf[:HeaderLen], 0
}

// Message is one batch read from a capture socket.
type Message struct {
	Session uint64
	Dir     Direction
	Lost    uint64 // frames the tap lost before this message
	Records []byte // pcap records: pcap.NextRecord reads them
}

// ParseMessage checks b's header and splits it.
func ParseMessage(b []byte) (Message, error) {
	le := binary.LittleEndian
	if len(b) < HeaderLen || le.Uint32(b) != magic {
		return Message{}, fmt.Errorf("capture: a %d-byte message that is not one of ours", len(b))
	}
	m := Message{Dir: Direction(b[4]), Session: le.Uint64(b[8:]), Lost: le.Uint64(b[16:]), Records: b[HeaderLen:]}
	if m.Dir != In && m.Dir != Out {
		return m, fmt.Errorf("capture: message of session %d with %v", m.Session, m.Dir)
	}
	return m, nil
}
