package qemustream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func stream(frames ...[]byte) []byte {
	var b []byte
	for _, f := range frames {
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	return b
}

// TestReaderBatches reads frames that arrive a byte at a time and many at once, and what a
// Writer wrote.
func TestReaderBatches(t *testing.T) {
	want := [][]byte{bytes.Repeat([]byte{1}, 60), bytes.Repeat([]byte{2}, 1514), bytes.Repeat([]byte{3}, MaxStreamFrame)}
	var buf bytes.Buffer
	w := NewWriter()
	for _, f := range want {
		copy(w.Frame(len(f)), f)
	}
	room := w.Frame(100)
	w.Shrink(room, 0) // dropped
	if err := w.Flush(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), stream(want...)) {
		t.Fatal("the writer's batch is not the frames' stream")
	}
	for name, r := range map[string]io.Reader{"whole": bytes.NewReader(buf.Bytes()), "bytewise": iotest.OneByteReader(bytes.NewReader(buf.Bytes()))} {
		rd := NewReader(r, 0)
		var got [][]byte
		for {
			fs, err := rd.ReadFrames(nil)
			for _, f := range fs {
				got = append(got, bytes.Clone(f))
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d frames, want %d", name, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("%s: frame %d differs", name, i)
			}
		}
	}
}

func TestReaderMalformed(t *testing.T) {
	for _, l := range []uint32{0, 13, MaxStreamFrame + 1, 1 << 31} {
		b := stream(make([]byte, 60))
		b = binary.BigEndian.AppendUint32(b, l)
		rd := NewReader(bytes.NewReader(b), 0)
		fs, err := rd.ReadFrames(nil)
		var m *MalformedError
		if !errors.As(err, &m) || m.Length != l || m.Offset != 64 || len(fs) != 1 {
			t.Fatalf("length %d: %d frames, %v", l, len(fs), err)
		}
	}
}

// FuzzReader: any stream parses into frames within the bounds, or ends in an error; never a
// panic or a slice past the buffer.
func FuzzReader(f *testing.F) {
	f.Add(stream(make([]byte, 60), make([]byte, 1514)))
	f.Add([]byte{0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		rd := NewReader(iotest.HalfReader(bytes.NewReader(b)), 0)
		for range len(b) + 2 {
			fs, err := rd.ReadFrames(nil)
			for _, fr := range fs {
				if len(fr) < minFrame || len(fr) > MaxStreamFrame {
					t.Fatalf("frame of %d bytes", len(fr))
				}
			}
			if err != nil {
				return
			}
		}
		t.Fatal("reader made no progress")
	})
}
