// Package pcap is the classic libpcap file format for Ethernet frames: a file header, then
// per frame a record header and the frame's bytes (LINKTYPE_ETHERNET, microsecond timestamps,
// little-endian), which tcpdump, tshark and Wireshark read. It appends to caller-owned
// buffers, so a data path writes a batch of records with one write; it is not pcapng and
// knows no other link type.
package pcap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// Sizes of the two headers.
const (
	FileHeaderLen   = 24
	RecordHeaderLen = 16
)

// Snaplen is the most bytes of a frame a record keeps (tcpdump's default): a 64 KiB GSO
// super-frame fits whole.
const Snaplen = 262144

const (
	magicMicro        = 0xa1b2c3d4
	linkTypeEthernet  = 1
	versionMajor      = 2
	versionMinor      = 4
	offsetTimeSec     = 0
	offsetTimeMicro   = 4
	offsetIncludedLen = 8
	offsetOriginalLen = 12
)

// AppendFileHeader appends the file header of a capture whose records keep at most snaplen
// bytes of a frame.
func AppendFileHeader(b []byte, snaplen int) []byte {
	var h [FileHeaderLen]byte
	le := binary.LittleEndian
	le.PutUint32(h[0:], magicMicro)
	le.PutUint16(h[4:], versionMajor)
	le.PutUint16(h[6:], versionMinor)
	// thiszone and sigfigs (8:16) stay 0, as every writer leaves them.
	le.PutUint32(h[16:], uint32(snaplen))
	le.PutUint32(h[20:], linkTypeEthernet)
	return append(b, h[:]...)
}

// RecordLen is how many bytes AppendRecord adds for frame.
func RecordLen(frame []byte, snaplen int) int { return RecordHeaderLen + min(len(frame), snaplen) }

// AppendRecord appends the record of frame, seen at t, keeping at most snaplen of its bytes.
func AppendRecord(b []byte, t time.Time, frame []byte, snaplen int) []byte {
	kept := frame[:min(len(frame), snaplen)]
	var h [RecordHeaderLen]byte
	le := binary.LittleEndian
	le.PutUint32(h[offsetTimeSec:], uint32(t.Unix()))
	le.PutUint32(h[offsetTimeMicro:], uint32(t.Nanosecond()/1000))
	le.PutUint32(h[offsetIncludedLen:], uint32(len(kept)))
	le.PutUint32(h[offsetOriginalLen:], uint32(len(frame)))
	return append(append(b, h[:]...), kept...)
}

// Record is one frame read back.
type Record struct {
	Time     time.Time
	Frame    []byte // the bytes kept; it aliases the buffer it was read from
	Original int    // the frame's length on the wire
}

// ErrShort is what NextRecord returns for a buffer that ends inside a record.
var ErrShort = errors.New("pcap: record cut short")

// NextRecord splits the first record off b: records concatenated in a buffer (a batch, or a
// file after its header) are read with it one by one. It fails with io.EOF on an empty b.
func NextRecord(b []byte) (r Record, rest []byte, err error) {
	if len(b) == 0 {
		return r, b, io.EOF
	}
	if len(b) < RecordHeaderLen {
		return r, b, ErrShort
	}
	le := binary.LittleEndian
	n := le.Uint32(b[offsetIncludedLen:])
	if uint64(n) > uint64(len(b)-RecordHeaderLen) {
		return r, b, ErrShort
	}
	r.Time = time.Unix(int64(le.Uint32(b[offsetTimeSec:])), int64(le.Uint32(b[offsetTimeMicro:]))*1000)
	r.Original = int(le.Uint32(b[offsetOriginalLen:]))
	end := RecordHeaderLen + int(n)
	r.Frame = b[RecordHeaderLen:end:end]
	return r, b[end:], nil
}

// ReadFile splits a whole capture file into its records; it accepts only what
// AppendFileHeader writes (little-endian, microseconds, Ethernet).
func ReadFile(b []byte) ([]Record, error) {
	if len(b) < FileHeaderLen {
		return nil, fmt.Errorf("pcap: %d bytes are no file header", len(b))
	}
	le := binary.LittleEndian
	if m := le.Uint32(b); m != magicMicro {
		return nil, fmt.Errorf("pcap: magic %#x, want %#x", m, magicMicro)
	}
	if lt := le.Uint32(b[20:]); lt != linkTypeEthernet {
		return nil, fmt.Errorf("pcap: link type %d, want Ethernet (1)", lt)
	}
	var out []Record
	for rest := b[FileHeaderLen:]; ; {
		r, next, err := NextRecord(rest)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out, rest = append(out, r), next
	}
}
