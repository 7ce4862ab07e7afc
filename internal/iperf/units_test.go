package iperf

import (
	"math"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"100": 100, "16K": 16384, "16k": 16384, "1.5M": 3 << 19, "2G": 2 << 30, "1T": 1 << 40, "0": 0} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "K", "abc", "-1", "16Q", "1e30G"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string][2]uint64{"100M": {100e6, 0}, "1G": {1e9, 0}, "10k/5": {10e3, 5}, "0": {0, 0}} {
		rate, burst, err := ParseRate(in)
		if err != nil || rate != want[0] || uint64(burst) != want[1] {
			t.Errorf("ParseRate(%q) = %d/%d, %v; want %v", in, rate, burst, err, want)
		}
	}
	for _, bad := range []string{"1G/0", "1G/1001", "1G/x", "fast"} {
		if _, _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
}

// TestUnitString renders numbers the way iperf3's unit_snprintf does: four characters, then
// the unit; bits count in 1000s, bytes in 1024s.
func TestUnitString(t *testing.T) {
	for _, tc := range []struct {
		n      float64
		format byte
		want   string
	}{
		{4.31 * (1 << 30), 'A', "4.31 GByte"},
		{23.8 * (1 << 20), 'A', "23.8 MByte"},
		{895 << 10, 'A', " 895 KByte"},
		{1023 << 10, 'A', "1023 KByte"},
		{0, 'A', "0.00 Byte"},
		{100e6 / 8, 'a', " 100 Mbit"},
		{16.9e9 / 8, 'a', "16.9 Gbit"},
		{99.96e6 / 8, 'a', " 100 Mbit"},
		{9.996e6 / 8, 'a', "10.0 Mbit"},
		{2.5e9 / 8, 'm', "2500 Mbit"},
		{1 << 20, 'K', "1024 KByte"},
	} {
		if got := unitString(tc.n, tc.format); got != tc.want {
			t.Errorf("unitString(%g, %c) = %q, want %q", tc.n, tc.format, got, tc.want)
		}
	}
	if got := unitString(math.Inf(1), 'a'); got == "" {
		t.Error("no text for an infinite rate")
	}
}

// TestLines prints lines iperf3 3.12 printed (from its output on this kind of host) from the
// values they show, and expects them byte for byte.
func TestLines(t *testing.T) {
	o := &textOut{format: 'a'}
	gib, mib, kib := float64(1<<30), float64(1<<20), float64(1<<10)
	bytes := func(v, unit float64) uint64 { return uint64(v * unit) }
	for _, tc := range []struct{ got, want string }{
		{o.line(5, "", 0, 1, bytes(1.97, gib), 16.9e9/8) + cwndTail(4, bytes(895, kib), ""),
			"[  5]   0.00-1.00   sec  1.97 GBytes  16.9 Gbits/sec    4    895 KBytes       \n"},
		{o.line(5, "", 0, 2, bytes(4.31, gib), 18.5e9/8) + retransTail(6, "sender"),
			"[  5]   0.00-2.00   sec  4.31 GBytes  18.5 Gbits/sec    6             sender\n"},
		{o.line(5, "", 0, 2, bytes(4.31, gib), 18.5e9/8) + plainTail("receiver"),
			"[  5]   0.00-2.00   sec  4.31 GBytes  18.5 Gbits/sec                  receiver\n"},
		{o.line(5, "", 0, 1, bytes(2.12, gib), 18.2e9/8) + plainTail(omittedMark),
			"[  5]   0.00-1.00   sec  2.12 GBytes  18.2 Gbits/sec                  (omitted)\n"},
		{o.line(5, "", 0, 1, bytes(11.9, mib), 100e6/8) + udpSenderTail("", 382, ""),
			"[  5]   0.00-1.00   sec  11.9 MBytes   100 Mbits/sec  382  \n"},
		{o.line(5, "", 0, 2, bytes(23.8, mib), 100e6/8) + udpTail(0.086, 0, 763, 0, "receiver"),
			"[  5]   0.00-2.00   sec  23.8 MBytes   100 Mbits/sec  0.086 ms  0/763 (0%)  receiver\n"},
		{o.line(5, "", 0, 2, bytes(23.7, mib), 99.5e6/8) + udpTail(0.013, 4, 763, lostPercent(4, 763), "receiver"),
			"[  5]   0.00-2.00   sec  23.7 MBytes  99.5 Mbits/sec  0.013 ms  4/763 (0.52%)  receiver\n"},
		{o.line(5, "[TX-C]", 0, 1, bytes(1.22, mib), 10.2e6/8) + udpSenderTail(udpSenderPad, 39, ""),
			"[  5][TX-C]   0.00-1.00   sec  1.22 MBytes  10.2 Mbits/sec            39  \n"},
		{o.line(0, "", 0, 1, bytes(2.23, gib), 19.2e9/8) + retransTail(3, ""),
			"[SUM]   0.00-1.00   sec  2.23 GBytes  19.2 Gbits/sec    3             \n"},
		{o.line(8, "[TX-S]", 2, 2, bytes(2.5, mib), 7.83e9/8) + cwndTail(0, bytes(4.5, mib), ""),
			"[  8][TX-S]   2.00-2.00   sec  2.50 MBytes  7.83 Gbits/sec    0   4.50 MBytes       \n"},
		{header(headerBWRetrCwnd, true), "[ ID][Role] Interval           Transfer     Bitrate         Retr  Cwnd\n"},
		{header(headerUDP, true), "[ ID][Role] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n"},
	} {
		if tc.got != tc.want {
			t.Errorf("got\n%q\nwant\n%q", tc.got, tc.want)
		}
	}
}
