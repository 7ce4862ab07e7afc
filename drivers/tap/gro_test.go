package tap

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// segment builds an Ethernet/IPv4/TCP frame of one flow with complete checksums.
func segment(seq uint32, flags byte, opts, payload []byte) []byte {
	hdr := header.EthLen + header.IPv4Len + 20 + len(opts)
	f := make([]byte, hdr+len(payload))
	copy(f, []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 8, 0})
	ip := f[header.EthLen:]
	ip[0], ip[6], ip[8], ip[9] = 0x45, 0x40, 64, 6
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	binary.BigEndian.PutUint16(ip[4:], uint16(seq))
	copy(ip[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], ^sum(ip[:header.IPv4Len], 0))
	tcp := ip[header.IPv4Len:]
	binary.BigEndian.PutUint16(tcp[0:], 5201)
	binary.BigEndian.PutUint16(tcp[2:], 40000)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	binary.BigEndian.PutUint32(tcp[8:], 77)
	tcp[12], tcp[13] = byte((20+len(opts))/4)<<4, flags
	binary.BigEndian.PutUint16(tcp[14:], 512)
	copy(tcp[20:], opts)
	copy(tcp[20+len(opts):], payload)
	binary.BigEndian.PutUint16(tcp[16:], ^sum(tcp, pseudoSum(ip, len(tcp))))
	return f
}

// fataler is what the helpers need of a *testing.T or *rapid.T.
type fataler interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// segmentLike does what the kernel does with a super-frame: cuts it into GSOSize segments
// with the first's headers, sequence numbers counted on, and complete checksums.
func segmentLike(t fataler, hdr []byte, o netdev.Offload, payload []byte) [][]byte {
	ip := hdr[header.EthLen:]
	if got := int(binary.BigEndian.Uint16(ip[2:])); got != len(hdr)-header.EthLen+len(payload) {
		t.Fatalf("super-frame IP length %d for %d bytes", got, len(hdr)-header.EthLen+len(payload))
	}
	if sum(ip[:header.IPv4Len], 0) != 0xffff {
		t.Fatal("super-frame IP header checksum wrong")
	}
	tcp := ip[header.IPv4Len:]
	if got := binary.BigEndian.Uint16(tcp[16:]); got != header.Fold64(pseudoSum(ip, len(tcp)+len(payload))) {
		t.Fatalf("partial checksum %#x, want the pseudo header's %#x", got, header.Fold64(pseudoSum(ip, len(tcp)+len(payload))))
	}
	if o.GSOType != netdev.GSOTCPv4 || o.Flags != netdev.OffloadNeedsCsum || int(o.HdrLen) != len(hdr) ||
		o.CsumStart != header.EthLen+header.IPv4Len || o.CsumOffset != 16 {
		t.Fatalf("offload %+v", o)
	}
	seq := binary.BigEndian.Uint32(tcp[4:])
	var out [][]byte
	for len(payload) > 0 {
		n := min(int(o.GSOSize), len(payload))
		flags := tcp[13] &^ header.TCPPsh
		if n == len(payload) {
			flags = tcp[13]
		}
		out = append(out, segment(seq, flags, tcp[20:len(tcp)], payload[:n]))
		seq += uint32(n)
		payload = payload[n:]
	}
	return out
}

// writeAll plays Device.Write's loop without a device: each write's iovecs as bytes.
func writeAll(t fataler, frames [][]byte) (writes [][][]byte) {
	for i := 0; i < len(frames); {
		n, seg := run(frames, nil, i)
		if n == 1 {
			writes = append(writes, [][]byte{frames[i]})
			i++
			continue
		}
		var payload []byte
		for _, f := range frames[i : i+n] {
			payload = append(payload, f[seg.hdrLen:]...)
		}
		hdr := make([]byte, seg.hdrLen)
		last := frames[i+n-1]
		o := superHeader(hdr, frames[i], seg, len(payload), last[header.EthLen+header.IPv4Len+13]&header.TCPPsh != 0)
		writes = append(writes, segmentLike(t, hdr, o, payload))
		i += n
	}
	return writes
}

var tsOpt = []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}

func TestJoinRun(t *testing.T) {
	data := make([]byte, 1448*50)
	for i := range data {
		data[i] = byte(i * 7)
	}
	var frames [][]byte
	seq := uint32(1 << 31)
	for i := 0; i < 50; i++ {
		flags := byte(header.TCPAck)
		if i == 20 || i == 49 {
			flags |= header.TCPPsh // ends a run
		}
		frames = append(frames, segment(seq, flags, tsOpt, data[i*1448:(i+1)*1448]))
		seq += 1448
	}
	writes := writeAll(t, frames)
	if len(writes) != 2 {
		t.Fatalf("50 segments with PSH on the 21st and the last: %d writes, want 2", len(writes))
	}
	var got [][]byte
	for _, w := range writes {
		got = append(got, w...)
	}
	for i := range frames {
		// The TCP segment comes back whole; the IP header differs only in its ID.
		if !bytes.Equal(got[i][header.EthLen+header.IPv4Len:], frames[i][header.EthLen+header.IPv4Len:]) {
			t.Fatalf("segment %d differs after joining and cutting", i)
		}
	}
}

// Anything that must not be joined ends a run: another flow, a gap, a short segment before
// the last, other options, a bad checksum, SYN/FIN, an empty ACK.
func TestJoinBreaks(t *testing.T) {
	p := bytes.Repeat([]byte{0xab}, 1000)
	a := segment(100, header.TCPAck, nil, p)
	cases := map[string][]byte{
		"gap":           segment(1100+1, header.TCPAck, nil, p),
		"other options": segment(1100, header.TCPAck, tsOpt[:4], p),
		"pure ACK":      segment(1100, header.TCPAck, nil, nil),
		"FIN":           segment(1100, header.TCPAck|0x01, nil, p),
		"longer":        segment(1100, header.TCPAck, nil, append(p, 1)),
	}
	bad := segment(1100, header.TCPAck, nil, p)
	bad[len(bad)-1] ^= 1
	cases["bad checksum"] = bad
	other := segment(1100, header.TCPAck, nil, p)
	other[header.EthLen+header.IPv4Len+1]++ // another port
	binary.BigEndian.PutUint16(other[header.EthLen+header.IPv4Len+16:], 0)
	binary.BigEndian.PutUint16(other[header.EthLen+header.IPv4Len+16:], ^sum(other[header.EthLen+header.IPv4Len:], pseudoSum(other[header.EthLen:], len(other)-header.EthLen-header.IPv4Len)))
	cases["other flow"] = other
	for name, b := range cases {
		if n, _ := run([][]byte{a, b}, nil, 0); n != 1 {
			t.Errorf("%s: joined (%d)", name, n)
		}
	}
	if n, _ := run([][]byte{a, segment(1100, header.TCPAck, nil, p[:10])}, nil, 0); n != 2 {
		t.Errorf("a shorter last segment: run of %d, want 2", n)
	}
	if n, _ := run([][]byte{a, segment(1100, header.TCPAck, nil, p)}, []netdev.Offload{{}, {GSOType: netdev.GSOTCPv4, GSOSize: 1000, Flags: netdev.OffloadNeedsCsum}}, 0); n != 1 {
		t.Errorf("a frame with GSO metadata joined")
	}
}

// Whatever the frames, joining then cutting as the kernel does gives back every frame's
// payload in order, and only segments of one flow are joined.
func TestJoinProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		mss := rapid.IntRange(1, 1460).Draw(t, "mss")
		n := rapid.IntRange(1, 120).Draw(t, "n")
		seq := rapid.Uint32().Draw(t, "seq")
		r := rand.New(rand.NewPCG(uint64(seq), 1))
		var frames [][]byte
		for i := 0; i < n; i++ {
			size := mss
			switch rapid.IntRange(0, 9).Draw(t, "kind") {
			case 0:
				size = rapid.IntRange(0, mss).Draw(t, "short")
			case 1:
				seq += 7 // a gap
			}
			p := make([]byte, size)
			for k := range p {
				p[k] = byte(r.Uint32())
			}
			frames = append(frames, segment(seq, header.TCPAck, nil, p))
			seq += uint32(size)
		}
		var want, got []byte
		for _, f := range frames {
			want = append(want, f[header.EthLen+header.IPv4Len+20:]...)
		}
		for _, w := range writeAll(t, frames) {
			for _, f := range w {
				got = append(got, f[header.EthLen+header.IPv4Len+20:]...)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatal("payloads differ after joining and cutting")
		}
	})
}
