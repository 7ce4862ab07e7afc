// Package qemustream is the framing of QEMU's stream netdev (-netdev stream, also passt's and
// QEMU's older -netdev socket): on a stream socket every Ethernet frame is a 4-byte
// big-endian length, then the frame, without a virtio-net header. A Reader takes as many
// frames as one read brings, a Writer sends a batch with one write.
package qemustream

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/nicstack/nicstack/netdev/header"
)

// MaxStreamFrame is the longest frame the stream carries: QEMU's own receive buffer
// (NET_BUFSIZE, 4 KiB plus 64 KiB) bounds what it sends and takes. It is QEMU's bound, not
// netdev.MaxFrame, and a little larger.
const MaxStreamFrame = 4096 + 65536

// minFrame is an Ethernet header: a shorter length is no frame.
const minFrame = header.EthLen

// MalformedError is a length no frame has; the stream cannot be resynchronised after it.
type MalformedError struct {
	Length uint32
	Offset int64 // of the length field, in bytes since the stream began
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("frame length %d at stream offset %d: want %d to %d", e.Length, e.Offset, minFrame, MaxStreamFrame)
}

// Reader parses frames out of a stream.
type Reader struct {
	r          io.Reader
	buf        []byte
	start, end int   // unparsed bytes are buf[start:end]
	offset     int64 // of buf[start] in the stream
}

// NewReader reads from r with a buffer of size bytes (at least two largest frames).
func NewReader(r io.Reader, size int) *Reader {
	return &Reader{r: r, buf: make([]byte, max(size, 2*(MaxStreamFrame+4)))}
}

// ReadFrames makes one read and appends the whole frames the buffer then holds to frames. The
// frames are slices of the reader's buffer, valid until the next call. A frame cut by the end
// of the read waits for the next one. It returns io.EOF (or the read's error) once the stream
// ends, and a *MalformedError for a bad length.
func (r *Reader) ReadFrames(frames [][]byte) ([][]byte, error) {
	if r.start > 0 && len(r.buf)-r.end < MaxStreamFrame+4 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.start, r.end = 0, n
	}
	n, err := r.r.Read(r.buf[r.end:])
	r.end += n
	for r.end-r.start >= 4 {
		l := binary.BigEndian.Uint32(r.buf[r.start:])
		if l < minFrame || l > MaxStreamFrame {
			return frames, &MalformedError{Length: l, Offset: r.offset}
		}
		if r.end-r.start < 4+int(l) {
			break
		}
		frames = append(frames, r.buf[r.start+4:r.start+4+int(l)])
		r.start += 4 + int(l)
		r.offset += 4 + int64(l)
	}
	if r.start == r.end {
		r.start, r.end = 0, 0
	}
	if n == 0 && err == nil {
		err = io.ErrNoProgress
	}
	if n > 0 {
		err = nil // the frames first; a lasting error comes back with the next read
	}
	return frames, err
}

// Writer batches frames for one write.
type Writer struct {
	buf []byte
}

// NewWriter returns an empty batch.
func NewWriter() *Writer { return &Writer{buf: make([]byte, 0, 256<<10)} }

// Frame returns room for a frame of n bytes in the batch, for the caller to fill.
func (w *Writer) Frame(n int) []byte {
	w.buf = slices.Grow(w.buf, 4+n)
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(n))
	w.buf = w.buf[:len(w.buf)+n]
	return w.buf[len(w.buf)-n:]
}

// Shrink cuts the last frame, whose room Frame returned, to n bytes; 0 takes it out.
func (w *Writer) Shrink(last []byte, n int) {
	hdr := len(w.buf) - len(last) - 4
	if n == 0 {
		w.buf = w.buf[:hdr]
		return
	}
	binary.BigEndian.PutUint32(w.buf[hdr:], uint32(n))
	w.buf = w.buf[:hdr+4+n]
}

// Flush writes the batch to out with one write and empties it.
func (w *Writer) Flush(out io.Writer) error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := out.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}
