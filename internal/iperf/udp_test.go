package iperf

import (
	"encoding/binary"
	"math"
	"testing"
	"time"
)

func TestUDPHeader(t *testing.T) {
	for _, u64 := range []bool{false, true} {
		b := make([]byte, 16)
		at := 1234*time.Second + 567890*time.Microsecond
		putUDPHeader(b, at, 1<<31+7, u64)
		sent, seq, ok := readUDPHeader(b, u64)
		if !ok || sent != at || seq != 1<<31+7 {
			t.Errorf("64-bit %v: read %v, %d, %v", u64, sent, seq, ok)
		}
	}
	// The layout iperf3 reads: seconds, microseconds, then the count, big-endian.
	b := make([]byte, 12)
	putUDPHeader(b, 3*time.Second+4*time.Microsecond, 5, false)
	if binary.BigEndian.Uint32(b) != 3 || binary.BigEndian.Uint32(b[4:]) != 4 || binary.BigEndian.Uint32(b[8:]) != 5 {
		t.Errorf("header % x", b)
	}
	if _, _, ok := readUDPHeader(make([]byte, 12), true); ok {
		t.Error("a 12-byte datagram read with 64-bit counters")
	}
}

// TestUDPConnect checks the handshake's bytes: a little-endian iperf3 writes 0x36373839 and
// answers 0x39383736, and older servers answer 987654321.
func TestUDPConnect(t *testing.T) {
	if binary.LittleEndian.Uint32(udpConnectMsg) != 0x36373839 || binary.LittleEndian.Uint32(udpConnectReply) != 0x39383736 {
		t.Fatalf("% x, % x", udpConnectMsg, udpConnectReply)
	}
	legacy := binary.LittleEndian.AppendUint32(nil, 987654321)
	if !isConnectReply(udpConnectReply) || !isConnectReply(legacy) || isConnectReply(udpConnectMsg) || isConnectReply(make([]byte, 16)) {
		t.Fatal("replies misread")
	}
}

// TestUDPReceiver follows iperf3's accounting: a gap is loss until a late datagram fills it,
// and then that one is out of order instead.
func TestUDPReceiver(t *testing.T) {
	var r udpReceiver
	sent := time.Second
	for _, seq := range []uint64{1, 2, 5, 3, 6} {
		r.add(sent, seq, sent+time.Millisecond)
		sent += time.Millisecond
	}
	highest, lost, ooo, _ := r.counts()
	if highest != 6 || lost != 1 || ooo != 1 {
		t.Fatalf("highest %d, lost %d, out of order %d; want 6, 1, 1", highest, lost, ooo)
	}
	// Jitter is RFC 1889's: the transit time's change, smoothed over 16 datagrams.
	var j udpReceiver
	j.add(0, 1, 10*time.Millisecond) // transit 10 ms
	j.add(time.Millisecond, 2, 13*time.Millisecond)
	_, _, _, jitter := j.counts()
	if want := 0.002 / 16; math.Abs(jitter-want) > 1e-12 {
		t.Fatalf("jitter %g, want %g", jitter, want)
	}
	j.restartJitter()
	if _, _, _, jitter := j.counts(); jitter != 0 {
		t.Fatalf("jitter %g after the omitted seconds", jitter)
	}
}
