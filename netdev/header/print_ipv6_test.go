package header

import (
	"bytes"
	"strconv"
	"testing"
)

func echo6(typ byte) []byte {
	m := []byte{typ, 0, 0, 0, 0, 1, 0, 2, 'p', 'i', 'n', 'g'}
	ICMPv6(m).UpdateChecksum(v6A, v6B)
	return m
}

// ipv6Frames are a frame of each kind the IPv6 printer tells apart: the fuzz corpus's seeds.
func ipv6Frames() [][]byte {
	ra := routerAdvert(make([]byte, 512))
	w := StartNA(make([]byte, 128), v6A, llA, v6A, NARouter|NASolicit|NAOverride)
	w.LinkAddr(NDPOptTargetLinkAddr, macA6)
	na := w.Finish()
	w = StartNS(make([]byte, 128), llA, SolicitedNode(v6A), v6A)
	w.LinkAddr(NDPOptSourceLinkAddr, macA6)
	ns := w.Finish()
	tooBig := make([]byte, 200)
	n := PutICMPv6Error(tooBig, ICMPv6PacketTooBig, 0, 1400, v6B, v6A, ipv6(ProtoUDP, 64, v6A, v6B, udp(1, 2, make([]byte, 100))))
	return [][]byte{
		eth(macB, macA, 0x86dd, ipv6(ProtoICMPv6, 64, v6A, v6B, echo6(ICMPv6EchoRequest))),
		eth(macA, macB, 0x86dd, ra),
		eth(macA, macB, 0x86dd, na),
		eth(macA, macB, 0x86dd, ns),
		eth(macA, macB, 0x86dd, tooBig[:n]),
		eth(macB, macA, 0x86dd, ipv6(ProtoHopByHop, 64, v6A, v6B, cat(ext(ProtoFragment, 0), frag(ProtoTCP, 0, true, 9),
			tcp(40000, 80, 1, 0, 0x02)))),
		eth(macB, macA, 0x86dd, ipv6(ProtoFragment, 64, v6A, v6B, cat(frag(ProtoUDP, 1448, false, 9), make([]byte, 16)))),
		eth(macB, macA, 0x86dd, ipv6(ProtoRouting, 64, v6A, v6B, cat(routing(ProtoUDP, 0, 1), udp(1, 2, nil)))),
	}
}

func TestIPv6PrintsInIPv4sStyle(t *testing.T) {
	frames := ipv6Frames()
	def, name := all(StyleDefault), all(StyleName)
	for _, c := range []struct {
		name  string
		frame []byte
		cfg   LogConfig
		want  string
	}{
		{"echo default", frames[0], def,
			"ETH 02:00:00:00:00:01 > 02:02:02:02:02:00  IPV6 2001:db8::1 > 2001:db8:0:1::2  ICMP6 echo request id 1 seq 2"},
		{"echo all", frames[0], LogConfig{IPv6: StyleAll, ICMP6: StyleAll},
			" IPV6 ver 6 tc 165 flow 74565 len 12 nxt 58 hlim 64 src 2001:db8::1 dst 2001:db8:0:1::2 ICMP6 typ 128 cod 0 crc " +
				strconv.Itoa(int(ICMPv6(echo6(ICMPv6EchoRequest)).Checksum())) + " echo request id 1 seq 2"},
		{"echo name", frames[0], name, "ETH IPV6 ICMP6"},
		{"router advertisement", frames[1], LogConfig{IPv6: StyleDefault, ICMP6: StyleDefault},
			" IPV6 fe80::2 > ff02::1  ICMP6 router advertisement hlim 64 flags 'MO' lifetime 1800 reachable 30000 retrans 1000" +
				" sll 02:00:00:00:00:01 prefix 2001:db8:1::/64 flags 'LA' valid 86400 preferred 14400 mtu 1500" +
				" rdnss 2001:db8::53 2001:db8::35 lifetime 300"},
		{"neighbor advertisement", frames[2], LogConfig{IPv6: StyleName, ICMP6: StyleDefault},
			" IPV6 ICMP6 neighbor advertisement target 2001:db8::1 flags 'RSO' tll 02:00:00:00:00:01"},
		{"neighbor solicitation", frames[3], LogConfig{IPv6: StyleName, ICMP6: StyleDefault},
			" IPV6 ICMP6 neighbor solicitation target 2001:db8::1 sll 02:00:00:00:00:01"},
		{"packet too big", frames[4], LogConfig{IPv6: StyleDefault, ICMP6: StyleDefault},
			" IPV6 2001:db8:0:1::2 > 2001:db8::1  ICMP6 packet too big mtu 1400"},
		{"first fragment", frames[5], LogConfig{IPv6: StyleDefault, TCP: StyleDefault},
			" IPV6 2001:db8::1 > 2001:db8:0:1::2 HBH FRAG off 0 id 9 more  TCP 40000 > 80 flags 's' "},
		{"later fragment", frames[6], def,
			"ETH 02:00:00:00:00:01 > 02:02:02:02:02:00  IPV6 2001:db8::1 > 2001:db8:0:1::2 FRAG off 1448 id 9 "},
		{"routing type 0", frames[7], LogConfig{IPv6: StyleDefault, UDP: StyleDefault},
			" IPV6 2001:db8::1 > 2001:db8:0:1::2 bad chain (routing type 0) "},
	} {
		if got := string(AppendFrame(nil, c.frame, &c.cfg)); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestTruncatedIPv6SaysWhereItEnds(t *testing.T) {
	ra := ipv6Frames()[1]
	cfg := all(StyleName)
	for _, c := range []struct {
		n    int
		want string
	}{
		{14 + 39, "ETH IPV6 truncated (39 bytes)"},
		{14 + 40 + 5, "ETH IPV6 ICMP6 truncated (5 bytes)"},
	} {
		if got := string(AppendFrame(nil, ra[:c.n], &cfg)); got != c.want {
			t.Errorf("%d bytes: got %q, want %q", c.n, got, c.want)
		}
	}
	cfg = LogConfig{ICMP6: StyleDefault, IPv6: StyleDefault}
	if got := string(AppendFrame(nil, ra[:14+40+12], &cfg)); !bytes.HasSuffix([]byte(got), []byte("ICMP6 router advertisement NDP truncated (12 bytes)")) {
		t.Errorf("RA cut in its fixed part: %q", got)
	}
	if got := string(AppendFrame(nil, ra[:14+40+16+20], &cfg)); !bytes.HasSuffix([]byte(got), []byte("sll 02:00:00:00:00:01 bad option")) {
		t.Errorf("RA cut in an option: %q", got)
	}
	hbh := eth(macB, macA, 0x86dd, ipv6(ProtoHopByHop, 64, v6A, v6B, ext(ProtoUDP, 1)))
	if got := string(AppendFrame(nil, hbh[:len(hbh)-4], &cfg)); !bytes.HasSuffix([]byte(got), []byte(" bad chain (truncated header) ")) {
		t.Errorf("hop-by-hop cut: %q", got)
	}
}

func TestAppendIPv6FrameAllocatesNothing(t *testing.T) {
	buf := make([]byte, 0, 4096)
	for _, s := range []Style{StyleDefault, StyleAll} {
		cfg := all(s)
		for _, frame := range ipv6Frames() {
			if n := testing.AllocsPerRun(50, func() { buf = AppendFrame(buf[:0], frame, &cfg) }); n != 0 {
				t.Errorf("%v allocations for %q", n, AppendFrame(nil, frame, &cfg))
			}
		}
	}
}

// Whatever the bytes of an IPv6 packet, the chain walk stays within it and ends, the ICMPv6
// and NDP views and checks take what they are given, and the printer prints one line.
func FuzzIPv6(f *testing.F) {
	for _, frame := range ipv6Frames() {
		f.Add(frame[EthLen:])
	}
	f.Add(ipv6(ProtoHopByHop, 255, v6A, v6B, cat(ext(ProtoDstOpts, 0), ext(ProtoRouting, 1), routing(ProtoFragment, 2, 1),
		frag(ProtoAH, 0, true, 7), ah(ProtoDstOpts, 1), ext(ProtoICMPv6, 0), echo6(ICMPv6EchoReply))))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		// The walker and views read only their own bytes: a copy with no room behind it makes
		// a read past the end panic.
		pkt = bytes.Clone(pkt)[:len(pkt):len(pkt)]
		if ip, ok := NewIPv6(pkt); ok {
			c := WalkIPv6(ip)
			if c.Offset < IPv6Len || c.Offset > len(ip) || c.Drop == ChainOK && c.Offset > IPv6MinMTU {
				t.Fatalf("chain ends at %d of %d bytes (%v)", c.Offset, len(ip), c.Drop)
			}
			_ = CheckNDP(ip, &c)
			if c.Drop == ChainOK && c.Proto == ProtoICMPv6 && !c.Frag.Is {
				if n, ok := NewNDP(ICMPv6(ip[c.Offset:])); ok {
					for l := n.Options(); len(l) > 0; {
						o, rest, ok := l.Next()
						if !ok {
							break
						}
						o.LinkAddr()
						o.Prefix()
						o.MTU()
						if _, k, ok := o.RDNSS(); ok {
							o.RDNSSAddr(k - 1)
						}
						l = rest
					}
				}
			}
		}
		frame := append(make([]byte, EthLen, EthLen+len(pkt)), pkt...)
		frame[12], frame[13] = 0x86, 0xdd
		for s := StyleName; s <= StyleAll; s++ {
			cfg := all(s)
			if out := AppendFrame(nil, frame, &cfg); bytes.ContainsAny(out, "\n\r") {
				t.Fatalf("line break in %q", out)
			}
		}
	})
}
