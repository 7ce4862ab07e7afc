package pcap

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
)

// arpRequest is a whole Ethernet frame tshark can name: who has 10.0.0.2, tell 10.0.0.1.
var arpRequest = []byte{
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x08, 0x06,
	0, 1, 0x08, 0, 6, 4, 0, 1, 0x02, 0, 0, 0, 0, 1, 10, 0, 0, 1,
	0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
}

func TestRecordsReadBackAsWritten(t *testing.T) {
	t0 := time.Unix(1700000000, 123456000)
	big := bytes.Repeat([]byte{0xab}, 100)
	b := AppendFileHeader(nil, Snaplen)
	b = AppendRecord(b, t0, arpRequest, Snaplen)
	b = AppendRecord(b, t0.Add(time.Millisecond), big, 60) // cut to the snaplen
	if want := FileHeaderLen + RecordLen(arpRequest, Snaplen) + RecordLen(big, 60); len(b) != want {
		t.Fatalf("%d bytes, want %d", len(b), want)
	}
	recs, err := ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	if !recs[0].Time.Equal(t0) || !bytes.Equal(recs[0].Frame, arpRequest) || recs[0].Original != len(arpRequest) {
		t.Errorf("first record %+v", recs[0])
	}
	if !recs[1].Time.Equal(t0.Add(time.Millisecond)) || len(recs[1].Frame) != 60 || recs[1].Original != 100 {
		t.Errorf("second record: %v, %d of %d bytes", recs[1].Time, len(recs[1].Frame), recs[1].Original)
	}
}

func TestCutRecordIsAnErrorNotAPanic(t *testing.T) {
	b := AppendRecord(nil, time.Now(), arpRequest, Snaplen)
	for n := 1; n < len(b); n++ {
		if _, _, err := NextRecord(b[:n]); err != ErrShort {
			t.Fatalf("%d of %d bytes: %v, want ErrShort", n, len(b), err)
		}
	}
	if _, err := ReadFile([]byte("not a capture file at all")); err == nil {
		t.Error("garbage read as a capture file")
	}
}

// tshark reads what we write, frame by frame.
func TestTsharkReadsOurFile(t *testing.T) {
	testutil.RequireCommand(t, "tshark")
	b := AppendFileHeader(nil, Snaplen)
	for i := range 3 {
		b = AppendRecord(b, time.Unix(1700000000+int64(i), 0), arpRequest, Snaplen)
	}
	path := filepath.Join(t.TempDir(), "arp.pcap")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("tshark", "-r", path, "-T", "fields", "-e", "frame.len", "-e", "arp.dst.proto_ipv4").Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || lines[0] != "42\t10.0.0.2" {
		t.Errorf("tshark read %q, want 3 lines of 42\\t10.0.0.2", out)
	}
}
