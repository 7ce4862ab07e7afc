package capture

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/nicstack/nicstack/runtime/pcap"
)

func pair(t *testing.T) (ours, theirs *os.File) {
	t.Helper()
	ours, theirs, err := Pair()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ours.Close(); theirs.Close() })
	return ours, theirs
}

func read(t *testing.T, ours *os.File) Message {
	t.Helper()
	b := make([]byte, MaxMessage)
	n, err := ours.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMessage(b[:n])
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func frames(t *testing.T, m Message) [][]byte {
	t.Helper()
	var out [][]byte
	for rest := m.Records; ; {
		r, next, err := pcap.NextRecord(rest)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out, rest = append(out, r.Frame), next
	}
}

// A batch arrives as one message naming the session and direction, its frames as records.
func TestBatchIsOneMessage(t *testing.T) {
	ours, theirs := pair(t)
	tap, err := NewTap(theirs, 7, Out)
	if err != nil {
		t.Fatal(err)
	}
	tap.Flush() // nothing seen: nothing sent
	tap.Frame([]byte("first frame"))
	tap.Frame(bytes.Repeat([]byte{1}, 1500))
	tap.Flush()
	m := read(t, ours)
	if m.Session != 7 || m.Dir != Out || m.Lost != 0 {
		t.Errorf("header: %+v", m)
	}
	if f := frames(t, m); len(f) != 2 || string(f[0]) != "first frame" || len(f[1]) != 1500 {
		t.Errorf("records: %d frames", len(f))
	}
}

// A frame that does not fit the message sends the message first; one larger than a message
// is cut to the snaplen.
func TestLargeFramesSplitTheBatch(t *testing.T) {
	ours, theirs := pair(t)
	tap, _ := NewTap(theirs, 1, In)
	big := make([]byte, 40000)
	tap.Frame(big)
	tap.Frame(big)
	tap.Frame(make([]byte, 70000))
	tap.Flush()
	for i, want := range []int{40000, 40000, Snaplen} {
		f := frames(t, read(t, ours))
		if len(f) != 1 || len(f[0]) != want {
			t.Fatalf("message %d: %d frames, want one of %d bytes", i, len(f), want)
		}
	}
}

// A reader that falls behind loses batches, never blocks the tap, and learns how many frames
// it lost from the next message; a reader that went away ends the tap.
func TestFullSocketLosesAndCounts(t *testing.T) {
	ours, theirs := pair(t)
	tap, _ := NewTap(theirs, 1, In)
	frame := make([]byte, 30000)
	sent := 0
	for tap.lost == 0 {
		tap.Frame(frame)
		tap.Flush()
		if sent++; sent > 10000 {
			t.Fatal("the socket never filled")
		}
	}
	for i := 0; i < sent-1; i++ {
		read(t, ours)
	}
	tap.Frame(frame)
	tap.Flush()
	if m := read(t, ours); m.Lost != 1 {
		t.Errorf("lost %d, want 1", m.Lost)
	}
	ours.Close()
	tap.Frame(frame)
	tap.Flush()
	if !tap.dead {
		t.Error("the tap writes on after its reader went away")
	}
	theirs.Close() // closed under the tap: it stays quiet
	tap.Frame(frame)
	tap.Flush()
}

func TestTapAllocatesNothing(t *testing.T) {
	ours, theirs := pair(t)
	tap, _ := NewTap(theirs, 1, In)
	frame := make([]byte, 64)
	buf := make([]byte, MaxMessage)
	if a := testing.AllocsPerRun(100, func() {
		for range 32 {
			tap.Frame(frame)
		}
		tap.Flush()
		ours.Read(buf)
	}); a != 0 {
		t.Errorf("%v allocations per batch", a)
	}
}

func TestGarbageIsNoMessage(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("short"), make([]byte, 100)} {
		if _, err := ParseMessage(b); err == nil {
			t.Errorf("%d bytes of garbage parsed", len(b))
		}
	}
}
