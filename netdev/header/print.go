// The frame printer: Genode's packet log, one line per Ethernet frame with each protocol
// printed as its style says (no, name, default or all), as nic_dump logs frames and as
// Genode's net library prints them for nic_router's verbose_packets; IPv6 (print_ipv6.go) is
// ours. Every length it reads is checked, so a truncated or garbage frame prints as far as it
// goes and says so.

package header

import (
	"encoding/binary"
	"strconv"
	"time"
)

// Style is how much of one protocol's header a line shows (Genode's Packet_log_style).
type Style uint8

const (
	StyleNo      Style = iota // nothing (the protocols inside still print)
	StyleName                 // the protocol's name
	StyleDefault              // a summary: addresses or ports
	StyleAll                  // every header field
)

var styleNames = [...]string{StyleNo: "no", StyleName: "name", StyleDefault: "default", StyleAll: "all"}

func (s Style) String() string { return styleNames[s] }

// ParseStyle reads a style as the config writes it.
func ParseStyle(v string) (Style, bool) {
	for s, n := range styleNames {
		if n == v {
			return Style(s), true
		}
	}
	return StyleNo, false
}

// LogConfig is the style of each protocol (Genode's Packet_log_config).
type LogConfig struct {
	Eth, ARP, IPv4, DHCP, UDP, ICMP, TCP Style
	// IPv6 and ICMPv6 are ours, in the style of IPv4's and ICMP's lines: Genode prints no
	// IPv6. An IPv6 frame prints past Ethernet only when IPv6 has a style other than
	// StyleNo, so a config of Genode's (nic_dump's, NetPrint) prints it as Genode does, as an
	// EtherType it does not know.
	IPv6, ICMP6 Style
	netPrint    bool // NetPrint's
}

// NetPrint is no config of nic_dump's: frames as Genode's net library prints them
// (Ethernet_frame::print and the others), which nic_router's verbose_packets log shows. It is
// the default style of each layer but for two things: no blank between layers beyond the
// one a layer ends with, and DHCP by its message type.
var NetPrint = LogConfig{Eth: StyleDefault, ARP: StyleDefault, IPv4: StyleDefault, DHCP: StyleDefault, UDP: StyleDefault, ICMP: StyleDefault, TCP: StyleDefault, netPrint: true}

// inner appends what goes between a layer and the one inside it: a blank in nic_dump's log
// (whatever the layer printed), nothing in the net library's.
func (c *LogConfig) inner(b []byte) []byte {
	if c.netPrint {
		return b
	}
	return append(b, ' ')
}

// Quiet reports whether c prints no protocol at all.
func (c *LogConfig) Quiet() bool { return *c == LogConfig{} }

var be = binary.BigEndian

// The printer reads each layer through the views of this package once the layer's header
// fits, not through New*: a header whose fields say it is malformed still prints, field by
// field, as Genode prints it.

// AppendFrame appends the log of frame as Genode's nic_dump prints it after the "(to <-
// from) " prefix, from Ethernet up, without a newline (with NetPrint: as Genode's net
// library prints it). It allocates nothing when b has room.
func AppendFrame(b []byte, frame []byte, c *LogConfig) []byte {
	e, ok := NewEth(frame)
	if !ok {
		return truncated(b, "ETH", frame)
	}
	switch c.Eth {
	case StyleAll:
		b = append(b, "ETH src "...)
		b = appendMAC(b, e.Src())
		b = append(b, " dst "...)
		b = appendMAC(b, e.Dst())
		b = append(b, " typ "...)
		b = strconv.AppendUint(b, uint64(e.Type()), 10)
	case StyleDefault:
		b = append(b, "ETH "...)
		b = appendMAC(b, e.Src())
		b = append(b, " > "...)
		b = appendMAC(b, e.Dst())
		b = append(b, ' ')
	case StyleName:
		b = append(b, "ETH"...)
	}
	// As in Genode, a space separates each layer from the one inside, whatever either printed.
	switch e.Type() {
	case EtherTypeARP:
		b = appendARP(c.inner(b), e.Payload(), c)
	case EtherTypeIPv4:
		b = appendIPv4(c.inner(b), e.Payload(), c)
	case EtherTypeIPv6:
		if c.IPv6 != StyleNo {
			b = appendIPv6(c.inner(b), e.Payload(), c)
		}
	}
	return b
}

// truncated appends what a layer whose header p cannot hold prints: its name and the bytes
// there were.
func truncated(b []byte, name string, p []byte) []byte {
	b = append(b, name...)
	b = append(b, " truncated ("...)
	b = strconv.AppendUint(b, uint64(len(p)), 10)
	return append(b, " bytes)"...)
}

func appendARP(b []byte, p []byte, c *LogConfig) []byte {
	if len(p) < ARPLen {
		return truncated(b, "ARP", p)
	}
	a := ARP(p[:ARPLen])
	switch c.ARP {
	case StyleAll:
		b = append(b, "ARP hw "...)
		b = strconv.AppendUint(b, uint64(be.Uint16(p[0:])), 10)
		b = append(b, " prot "...)
		b = strconv.AppendUint(b, uint64(be.Uint16(p[2:])), 10)
		b = append(b, " hwsz "...)
		b = strconv.AppendUint(b, uint64(p[4]), 10)
		b = append(b, " protsz "...)
		b = strconv.AppendUint(b, uint64(p[5]), 10)
		b = append(b, " op "...)
		b = strconv.AppendUint(b, uint64(a.Op()), 10)
		// The addresses are where Ethernet and IPv4 put them only for that pair.
		if _, ok := NewARP(p); ok {
			b = append(b, " srcmac "...)
			b = appendMAC(b, a.SenderMAC())
			b = append(b, " srcip "...)
			b = appendIP(b, a.SenderIP())
			b = append(b, " dstmac "...)
			b = appendMAC(b, a.TargetMAC())
			b = append(b, " dstip "...)
			b = appendIP(b, a.TargetIP())
		} else {
			b = append(b, " ..."...)
		}
	case StyleDefault:
		b = append(b, "ARP "...)
		b = appendMAC(b, a.SenderMAC())
		b = append(b, ' ')
		b = appendIP(b, a.SenderIP())
		b = append(b, " > "...)
		b = appendMAC(b, a.TargetMAC())
		b = append(b, ' ')
		b = appendIP(b, a.TargetIP())
		b = append(b, " cmd "...)
		b = strconv.AppendUint(b, uint64(a.Op()), 10)
	case StyleName:
		b = append(b, "ARP"...)
	}
	return b
}

func appendIPv4(b []byte, p []byte, c *LogConfig) []byte {
	if len(p) < IPv4Len {
		return truncated(b, "IPV4", p)
	}
	ip := IPv4(p)
	ihl := int(p[0] & 0x0f)
	switch c.IPv4 {
	case StyleAll:
		b = append(b, "IPV4 hdrlen "...)
		b = strconv.AppendUint(b, uint64(ihl), 10)
		b = append(b, " ver "...)
		b = strconv.AppendUint(b, uint64(p[0]>>4), 10)
		b = append(b, " dsrv "...)
		b = strconv.AppendUint(b, uint64(p[1]>>2), 10)
		b = append(b, " ecn "...)
		b = strconv.AppendUint(b, uint64(p[1]&3), 10)
		b = append(b, " len "...)
		b = strconv.AppendUint(b, uint64(be.Uint16(p[2:])), 10)
		b = append(b, " id "...)
		b = strconv.AppendUint(b, uint64(be.Uint16(p[4:])), 10)
		b = append(b, " flg "...)
		b = strconv.AppendUint(b, uint64(p[6]>>5), 10)
		b = append(b, " frgoff "...)
		b = strconv.AppendUint(b, uint64(be.Uint16(p[6:])&0x1fff), 10)
		b = append(b, " ttl  "...) // two spaces: Genode's
		b = strconv.AppendUint(b, uint64(p[8]), 10)
		b = append(b, " prot "...)
		b = strconv.AppendUint(b, uint64(ip.Protocol()), 10)
		b = append(b, " crc "...)
		b = strconv.AppendUint(b, uint64(ip.Checksum()), 10)
		b = append(b, " src "...)
		b = appendIP(b, ip.Src())
		b = append(b, " dst "...)
		b = appendIP(b, ip.Dst())
	case StyleDefault:
		b = append(b, "IPV4 "...)
		b = appendIP(b, ip.Src())
		b = append(b, " > "...)
		b = appendIP(b, ip.Dst())
		b = append(b, ' ')
	case StyleName:
		b = append(b, "IPV4"...)
	}
	// The payload starts after the options the header length counts; a header length the
	// packet cannot hold leaves nothing inside to print.
	if ihl < 5 || ihl*4 > len(p) {
		return b
	}
	data := p[ihl*4:]
	switch ip.Protocol() {
	case ProtoTCP:
		b = appendTCP(c.inner(b), data, c)
	case ProtoUDP:
		b = appendUDP(c.inner(b), data, c)
	case ProtoICMP:
		b = appendICMP(c.inner(b), data, c)
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendMAC writes a MAC address as Genode does: lower-case hex pairs joined by colons.
func appendMAC(b []byte, m MAC) []byte {
	for i, x := range m {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, hexDigits[x>>4], hexDigits[x&0xf])
	}
	return b
}

func appendIP(b []byte, a [4]byte) []byte {
	for i, x := range a {
		if i > 0 {
			b = append(b, '.')
		}
		b = strconv.AppendUint(b, uint64(x), 10)
	}
	return b
}

// AppendLine appends the log line of frame passed from side from to side to, as Genode's
// nic_dump writes it: "(to <- from) " and the frame, then, when timing is not nil, the time
// suffix, and a newline.
func AppendLine(b []byte, to, from string, frame []byte, c *LogConfig, timing *Timing, now time.Time) []byte {
	b = append(b, '(')
	b = append(b, to...)
	b = append(b, " <- "...)
	b = append(b, from...)
	b = append(b, ") "...)
	b = AppendFrame(b, frame, c)
	if timing != nil {
		b = timing.Append(b, now)
	}
	return append(b, '\n')
}

// Timing writes Genode's " time N ms (Δ M ms)": the milliseconds since start and since the
// frame before, in either direction (the first frame's are since start).
type Timing struct {
	start  time.Time
	lastMS int64
}

// NewTiming counts from start.
func NewTiming(start time.Time) *Timing { return &Timing{start: start} }

// Append appends the suffix of a frame seen at now.
func (t *Timing) Append(b []byte, now time.Time) []byte {
	ms := now.Sub(t.start).Milliseconds()
	b = append(b, " time "...)
	b = strconv.AppendInt(b, ms, 10)
	b = append(b, " ms (Δ "...)
	b = strconv.AppendInt(b, ms-t.lastMS, 10)
	t.lastMS = ms
	return append(b, " ms)"...)
}
