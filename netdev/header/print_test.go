package header

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"
)

// Frames built by hand, byte by byte, so that the printer is checked against the wire format
// and not against a codec that could share its mistakes.

var (
	macA  = []byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
	macB  = []byte{0x02, 0x02, 0x02, 0x02, 0x02, 0x00}
	bcast = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

func eth(dst, src []byte, typ uint16, payload []byte) []byte {
	b := append(append(append([]byte{}, dst...), src...), byte(typ>>8), byte(typ))
	return append(b, payload...)
}

func ipv4(proto byte, src, dst [4]byte, payload []byte) []byte {
	h := []byte{0x45, 0x00, 0, 0, 0x00, 0x01, 0x40, 0x00, 64, proto, 0xab, 0xcd}
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(payload)))
	h = append(append(h, src[:]...), dst[:]...)
	return append(h, payload...)
}

func udp(src, dst uint16, payload []byte) []byte {
	h := binary.BigEndian.AppendUint16(nil, src)
	h = binary.BigEndian.AppendUint16(h, dst)
	h = binary.BigEndian.AppendUint16(h, uint16(8+len(payload)))
	h = binary.BigEndian.AppendUint16(h, 0x1234)
	return append(h, payload...)
}

func tcp(src, dst uint16, seq, ack uint32, flags uint16) []byte {
	h := binary.BigEndian.AppendUint16(nil, src)
	h = binary.BigEndian.AppendUint16(h, dst)
	h = binary.BigEndian.AppendUint32(h, seq)
	h = binary.BigEndian.AppendUint32(h, ack)
	h = binary.BigEndian.AppendUint16(h, 5<<12|flags)
	return append(h, 0xff, 0xff, 0x00, 0x07, 0x00, 0x00) // window, checksum, urgent pointer
}

var arpRequest = eth(bcast, macA, 0x0806, []byte{
	0, 1, 0x08, 0, 6, 4, 0, 1,
	0x02, 0, 0, 0, 0, 1, 10, 0, 0, 1,
	0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
})

var (
	hostA = [4]byte{10, 0, 1, 2}
	hostB = [4]byte{10, 0, 2, 2}
)

// dhcpDiscover is a client's DHCPDISCOVER: op 1, its MAC in chaddr, options 53 (type 1) and
// 55 (parameters 1 3 6), then end.
func dhcpDiscover() []byte {
	p := make([]byte, 240)
	p[0], p[1], p[2] = 1, 1, 6
	binary.BigEndian.PutUint32(p[4:], 0x01020304)
	binary.BigEndian.PutUint16(p[10:], 0x8000)
	copy(p[28:], macA)
	copy(p[44:], "boot\nsrv")
	binary.BigEndian.PutUint32(p[236:], 0x63825363)
	p = append(p, 53, 1, 1, 55, 3, 1, 3, 6, 255)
	return eth(bcast, macA, 0x0800, ipv4(17, [4]byte{}, [4]byte{255, 255, 255, 255}, udp(68, 67, p)))
}

func all(s Style) LogConfig {
	return LogConfig{Eth: s, ARP: s, IPv4: s, DHCP: s, UDP: s, ICMP: s, TCP: s, IPv6: s, ICMP6: s}
}

func TestEachProtocolPrintsAsGenodes(t *testing.T) {
	udpFrame := eth(macB, macA, 0x0800, ipv4(17, hostA, hostB, udp(49152, 12345, []byte("payload"))))
	synAck := eth(macA, macB, 0x0800, ipv4(6, hostB, hostA, tcp(80, 40000, 1000, 2001, 0x12)))
	echo := eth(macB, macA, 0x0800, ipv4(1, hostA, hostB, []byte{8, 0, 0xf7, 0xfe, 0, 1, 0, 1}))
	for _, c := range []struct {
		name  string
		frame []byte
		cfg   LogConfig
		want  string
	}{
		{"arp default", arpRequest, all(StyleDefault),
			"ETH 02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff  ARP 02:00:00:00:00:01 10.0.0.1 > 00:00:00:00:00:00 10.0.0.2 cmd 1"},
		{"arp all", arpRequest, all(StyleAll),
			"ETH src 02:00:00:00:00:01 dst ff:ff:ff:ff:ff:ff typ 2054 ARP hw 1 prot 2048 hwsz 6 protsz 4 op 1 srcmac 02:00:00:00:00:01 srcip 10.0.0.1 dstmac 00:00:00:00:00:00 dstip 10.0.0.2"},
		{"arp name", arpRequest, all(StyleName), "ETH ARP"},
		{"udp default", udpFrame, all(StyleDefault),
			"ETH 02:00:00:00:00:01 > 02:02:02:02:02:00  IPV4 10.0.1.2 > 10.0.2.2  UDP 49152 > 12345 "},
		{"udp all", udpFrame, all(StyleAll),
			"ETH src 02:00:00:00:00:01 dst 02:02:02:02:02:00 typ 2048 IPV4 hdrlen 5 ver 4 dsrv 0 ecn 0 len 35 id 1 flg 2 frgoff 0 ttl  64 prot 17 crc 43981 src 10.0.1.2 dst 10.0.2.2 UDP src 49152 dst 12345 len 15 crc 4660"},
		{"tcp default", synAck, all(StyleDefault),
			"ETH 02:02:02:02:02:00 > 02:00:00:00:00:01  IPV4 10.0.2.2 > 10.0.1.2  TCP 80 > 40000 flags 'sa' "},
		{"tcp all", synAck, LogConfig{TCP: StyleAll},
			"  TCP src 80 dst 40000 seqn 1000 ackn 2001 doff 5 flg 20498 winsz 65535 crc 7 urgp 0"},
		{"icmp default", echo, LogConfig{ICMP: StyleDefault}, "  ICMP 8 0"},
		{"icmp all", echo, LogConfig{Eth: StyleName, IPv4: StyleName, ICMP: StyleAll}, "ETH IPV4 ICMP typ 8 cod 0 crc 63486 roh 65537"},
		{"dhcp default", dhcpDiscover(), LogConfig{UDP: StyleDefault, DHCP: StyleDefault},
			"  UDP 68 > 67  DHCP 02:00:00:00:00:01 > 0.0.0.0 cmd 1"},
		{"dhcp all", dhcpDiscover(), LogConfig{DHCP: StyleAll},
			"   DHCP op 1 htyp 1 hlen 6 hps 0 xid 16909060 sec 0 flg 0x8000 ci 0.0.0.0 yi 0.0.0.0 si 0.0.0.0 gi 0.0.0.0 ch 02:00:00:00:00:01 srv boot.srv file  mag 1669485411 opt 53:1:01 55:3:010306"},
		{"nic_dump.run's styles", dhcpDiscover(), LogConfig{Eth: StyleName, ARP: StyleAll, IPv4: StyleDefault, ICMP: StyleAll, TCP: StyleDefault},
			"ETH IPV4 0.0.0.0 > 255.255.255.255   "},
		{"other ethertype", eth(macB, macA, 0x88cc, make([]byte, 40)), all(StyleDefault),
			"ETH 02:00:00:00:00:01 > 02:02:02:02:02:00 "},
		{"ipv6 under a config of Genode's", eth(macB, macA, 0x86dd, ipv6(ProtoUDP, 64, v6A, v6B, udp(1, 2, nil))),
			LogConfig{Eth: StyleDefault, ARP: StyleDefault, IPv4: StyleDefault, DHCP: StyleDefault, UDP: StyleDefault, ICMP: StyleDefault, TCP: StyleDefault},
			"ETH 02:00:00:00:00:01 > 02:02:02:02:02:00 "},
	} {
		got := string(AppendFrame(nil, c.frame, &c.cfg))
		if got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// A frame that ends inside a header prints the layers before it, then that layer's name and
// how many bytes it had.
func TestTruncatedFramesSayWhereTheyEnd(t *testing.T) {
	udpFrame := eth(macB, macA, 0x0800, ipv4(17, hostA, hostB, udp(49152, 12345, nil)))
	cfg := all(StyleName)
	for _, c := range []struct {
		frame []byte
		want  string
	}{
		{nil, "ETH truncated (0 bytes)"},
		{arpRequest[:10], "ETH truncated (10 bytes)"},
		{arpRequest[:30], "ETH ARP truncated (16 bytes)"},
		{udpFrame[:14+12], "ETH IPV4 truncated (12 bytes)"},
		{udpFrame[:14+20+3], "ETH IPV4 UDP truncated (3 bytes)"},
		{dhcpDiscover()[:14+20+8+100], "ETH IPV4 UDP DHCP truncated (100 bytes)"},
	} {
		if got := string(AppendFrame(nil, c.frame, &cfg)); got != c.want {
			t.Errorf("%d bytes: got %q, want %q", len(c.frame), got, c.want)
		}
	}
	// An option that runs past the packet ends the option list.
	d := dhcpDiscover()
	d = append(d[:len(d)-1], 12, 40, 'h')
	cfg = LogConfig{DHCP: StyleAll}
	if got := string(AppendFrame(nil, d, &cfg)); !strings.HasSuffix(got, "opt 53:1:01 55:3:010306 truncated") {
		t.Errorf("cut option: %q", got)
	}
	// A header length the packet cannot hold leaves the payload unprinted.
	bad := append([]byte{}, udpFrame...)
	bad[14] = 0x4f
	cfg = all(StyleName)
	if got := string(AppendFrame(nil, bad, &cfg)); got != "ETH IPV4" {
		t.Errorf("IHL 15 in a 28-byte packet: %q", got)
	}
}

func TestLineHasGenodesPrefixAndTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	timing := NewTiming(t0)
	cfg := all(StyleName)
	b := AppendLine(nil, "uplink", "downlink", arpRequest, &cfg, timing, t0.Add(4626*time.Millisecond))
	b = AppendLine(b, "downlink", "uplink", arpRequest, &cfg, timing, t0.Add(4641*time.Millisecond))
	b = AppendLine(b, "downlink", "uplink", arpRequest, &cfg, nil, time.Time{})
	want := "(uplink <- downlink) ETH ARP time 4626 ms (Δ 4626 ms)\n" +
		"(downlink <- uplink) ETH ARP time 4641 ms (Δ 15 ms)\n" +
		"(downlink <- uplink) ETH ARP\n"
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
}

func TestAppendFrameAllocatesNothing(t *testing.T) {
	frame := dhcpDiscover()
	cfg := all(StyleAll)
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf = AppendFrame(buf[:0], frame, &cfg) }); n != 0 {
		t.Errorf("%v allocations per frame", n)
	}
}

// Whatever the bytes, printing ends, never panics, and stays on one line.
func FuzzAppendFrame(f *testing.F) {
	f.Add(arpRequest, uint8(3))
	f.Add(dhcpDiscover(), uint8(3))
	f.Add(eth(macB, macA, 0x0800, ipv4(6, hostA, hostB, tcp(1, 2, 3, 4, 0x1ff))), uint8(2))
	for _, frame := range ipv6Frames() {
		f.Add(frame, uint8(2))
		f.Add(frame, uint8(3))
	}
	f.Fuzz(func(t *testing.T, frame []byte, style uint8) {
		cfg := all(Style(style % 4))
		out := AppendFrame(nil, frame, &cfg)
		if bytes.ContainsAny(out, "\n\r") {
			t.Fatalf("line break in %q", out)
		}
	})
}
