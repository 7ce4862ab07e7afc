package vnethdr

import (
	"testing"

	"github.com/nicstack/nicstack/netdev"
)

// tcpFrame is Ethernet + IPv4 + a TCP header with data offset doff words, plus payload bytes.
func tcpFrame(doff, payload int) []byte {
	f := make([]byte, 14+20+doff*4+payload)
	f[14+20+12] = byte(doff << 4)
	return f
}

func TestRoundTrip(t *testing.T) {
	o := netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOTCPv4, HdrLen: 1234, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
	var h [Len]byte
	Encode(h[:], &o)
	var got netdev.Offload
	if !Decode(h[:], tcpFrame(8, 3000), &got) {
		t.Fatal("valid header refused")
	}
	o.HdrLen = 14 + 20 + 32 // the real header length replaces the kernel's hint
	if got != o {
		t.Fatalf("got %+v, want %+v", got, o)
	}
}

func TestFix(t *testing.T) {
	cases := []struct {
		name string
		o    netdev.Offload
		f    []byte
		ok   bool
		hdr  uint16
	}{
		{"plain", netdev.Offload{HdrLen: 99, GSOSize: 5}, tcpFrame(5, 0), true, 0},
		{"udp csum", netdev.Offload{Flags: netdev.OffloadNeedsCsum, CsumStart: 34, CsumOffset: 6}, make([]byte, 42), true, 0},
		{"csum past end", netdev.Offload{Flags: netdev.OffloadNeedsCsum, CsumStart: 34, CsumOffset: 6}, make([]byte, 41), false, 0},
		{"unknown flag", netdev.Offload{Flags: 4}, tcpFrame(5, 0), false, 0},
		{"ecn alone", netdev.Offload{GSOType: netdev.GSOECN}, tcpFrame(5, 0), false, 0},
		{"gso without csum", netdev.Offload{GSOType: netdev.GSOTCPv4, GSOSize: 1448}, tcpFrame(5, 9000), false, 0},
		{"gso size 0", netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOTCPv4, CsumStart: 34, CsumOffset: 16}, tcpFrame(5, 9000), false, 0},
		{"tso6 ecn", netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOTCPv6 | netdev.GSOECN, GSOSize: 1440, CsumStart: 34, CsumOffset: 16}, tcpFrame(5, 9000), true, 54},
		{"tcp doff 4", netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOTCPv4, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}, tcpFrame(4, 9000), false, 0},
		{"tcp header cut", netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOTCPv4, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}, tcpFrame(15, 0)[:60], false, 0},
		{"ufo", netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOUDP, GSOSize: 1400, CsumStart: 34, CsumOffset: 6}, make([]byte, 3000), true, 42},
		{"udp l4 unknown", netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: 5, GSOSize: 1400, CsumStart: 34, CsumOffset: 6}, make([]byte, 3000), false, 0},
	}
	for _, c := range cases {
		o := c.o
		if ok := Fix(c.f, &o); ok != c.ok || (ok && o.HdrLen != c.hdr) {
			t.Errorf("%s: ok %v hdr %d, want %v %d", c.name, ok, o.HdrLen, c.ok, c.hdr)
		}
	}
}

// Headers and frames from the wire are arbitrary: Decode never panics, and what it accepts
// stays inside the frame.
func FuzzDecode(f *testing.F) {
	var h [Len]byte
	Encode(h[:], &netdev.Offload{Flags: 1, GSOType: 1, GSOSize: 1448, CsumStart: 34, CsumOffset: 16})
	f.Add(h[:], tcpFrame(5, 100))
	f.Fuzz(func(t *testing.T, h, frame []byte) {
		if len(h) < Len {
			return
		}
		var o netdev.Offload
		if !Decode(h, frame, &o) {
			return
		}
		if o.Flags&netdev.OffloadNeedsCsum != 0 && int(o.CsumStart)+int(o.CsumOffset)+2 > len(frame) {
			t.Fatalf("checksum outside frame: %+v len %d", o, len(frame))
		}
		if int(o.HdrLen) > len(frame) {
			t.Fatalf("header longer than frame: %+v len %d", o, len(frame))
		}
	})
}
