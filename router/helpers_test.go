package router

import (
	"encoding/binary"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/model"
	"github.com/nicstack/nicstack/runtime/config"
)

// xmlNode parses a test config.
func xmlNode(t testing.TB, s string) *config.Node {
	t.Helper()
	n, err := config.ParseXML("test", []byte(s))
	if err != nil {
		t.Fatalf("test config: %v", err)
	}
	return n
}

// modelOf is the router's config of a test's XML text.
func modelOf(t testing.TB, s string) *model.Config { return model.Parse(xmlNode(t, s)) }

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// fakePort records what the router sends; capacity limits Alloc to simulate a full stream.
type fakePort struct {
	sent     [][]byte
	offs     []netdev.Offload
	released []uint64
	flushes  int
	link     []bool
	capacity int // 0: unlimited
	full     bool
	// As a QueuePort (egress_test.go): buffers held, how many are held and how many were
	// discarded; with manual the peer acknowledges only on ack, inflight the sizes till then.
	bufs      [][]byte
	holding   int
	discarded int
	manual    bool
	inflight  []int
}

func (p *fakePort) Alloc(n int) ([]byte, bool) {
	if p.full || p.capacity > 0 && len(p.sent) >= p.capacity {
		return nil, false
	}
	return make([]byte, n), true
}
func (p *fakePort) Submit(f []byte, off netdev.Offload) {
	p.sent = append(p.sent, f)
	p.offs = append(p.offs, off)
}
func (p *fakePort) Flush()            { p.flushes++ }
func (p *fakePort) Release(id uint64) { p.released = append(p.released, id) }
func (p *fakePort) LinkState(up bool) { p.link = append(p.link, up) }

// take returns and forgets what was sent.
func (p *fakePort) take() [][]byte { s := p.sent; p.sent, p.offs = nil, nil; return s }

type bench struct {
	t     testing.TB
	r     *Router
	clock *fakeClock
	log   *strings.Builder
}

func newBench(t testing.TB, cfg string) *bench {
	t.Helper()
	m := modelOf(t, cfg)
	if len(m.Problems) > 0 && !strings.Contains(cfg, "<!-- problems expected -->") {
		t.Fatalf("config problems: %v", m.Problems)
	}
	b := &bench{t: t, clock: &fakeClock{t: time.Unix(1000, 0)}, log: &strings.Builder{}}
	b.r = New(Options{Clock: b.clock, Log: slog.New(slog.NewTextHandler(b.log, nil))})
	b.r.Configure(m)
	return b
}

func (b *bench) attach(label string, kind Kind, mac header.MAC) (*Interface, *fakePort) {
	p := &fakePort{}
	return b.r.Attach(Session{Label: label, Kind: kind, MAC: mac, Port: p}), p
}

// send handles one frame as one batch: Handle, then Flush (which publishes counters).
func (b *bench) send(i *Interface, f []byte) Verdict {
	v := b.r.Handle(i, f, nil, 0)
	b.r.Flush()
	return v
}

func ip4(s string) [4]byte {
	var a [4]byte
	parts := strings.Split(s, ".")
	for k := range a {
		var v int
		for _, c := range parts[k] {
			v = v*10 + int(c-'0')
		}
		a[k] = byte(v)
	}
	return a
}

var (
	macVM      = header.MAC{2, 2, 2, 2, 2, 1}
	macUplink  = header.MAC{2, 0, 0, 0, 0, 0x10}
	macGateway = header.MAC{2, 0, 0, 0, 0, 1}
	macServer  = header.MAC{2, 0, 0, 0, 0, 5}
)

func ethFrame(src, dst header.MAC, typ uint16, payload []byte) []byte {
	b := make([]byte, header.EthLen+len(payload))
	e := header.Eth(b)
	e.SetSrc(src)
	e.SetDst(dst)
	e.SetType(typ)
	copy(b[header.EthLen:], payload)
	return b
}

func ipPacket(protocol uint8, src, dst [4]byte, l4 []byte) []byte {
	b := make([]byte, 20+len(l4))
	header.PutIPv4(b, len(b), protocol, src, dst)
	copy(b[20:], l4)
	return b
}

func udpFrameT(srcMAC, dstMAC header.MAC, src, dst [4]byte, sport, dport uint16, payload []byte) []byte {
	return udpFrame(srcMAC, dstMAC, src, dst, sport, dport, payload)
}

func tcpFrame(srcMAC, dstMAC header.MAC, src, dst [4]byte, sport, dport uint16, flags uint8, seq, ack uint32, payload []byte) []byte {
	seg := make([]byte, 20+len(payload))
	header.Ports(seg).SetSrc(sport)
	header.Ports(seg).SetDst(dport)
	binary.BigEndian.PutUint32(seg[4:], seq)
	binary.BigEndian.PutUint32(seg[8:], ack)
	seg[12] = 5 << 4
	seg[13] = flags
	copy(seg[20:], payload)
	c := header.Checksum(seg, header.PseudoSum(src, dst, header.ProtoTCP, len(seg)))
	binary.BigEndian.PutUint16(seg[16:], c)
	return ethFrame(srcMAC, dstMAC, header.EtherTypeIPv4, ipPacket(header.ProtoTCP, src, dst, seg))
}

func icmpEcho(srcMAC, dstMAC header.MAC, src, dst [4]byte, typ uint8, id, seq uint16) []byte {
	m := make([]byte, 16)
	m[0] = typ
	binary.BigEndian.PutUint16(m[4:], id)
	binary.BigEndian.PutUint16(m[6:], seq)
	copy(m[8:], "pingdata")
	header.ICMP(m).UpdateChecksum()
	return ethFrame(srcMAC, dstMAC, header.EtherTypeIPv4, ipPacket(header.ProtoICMP, src, dst, m))
}

func arpFrame(op uint16, sMAC header.MAC, sIP [4]byte, tMAC header.MAC, tIP [4]byte, ethDst header.MAC) []byte {
	p := make([]byte, header.ARPLen)
	header.PutARP(p, op, sMAC, sIP, tMAC, tIP)
	return ethFrame(sMAC, ethDst, header.EtherTypeARP, p)
}

// parsed is a sent frame's headers, checked for valid checksums.
type parsed struct {
	eth          header.Eth
	ip           header.IPv4
	sport, dport uint16
	icmp         header.ICMP
	arp          header.ARP
}

func parse(t testing.TB, f []byte) parsed {
	t.Helper()
	e, ok := header.NewEth(f)
	if !ok {
		t.Fatalf("short frame")
	}
	out := parsed{eth: e}
	if e.Type() == header.EtherTypeARP {
		out.arp, _ = header.NewARP(e.Payload())
		return out
	}
	ip, ok := header.NewIPv4(e.Payload())
	if !ok {
		t.Fatalf("bad IPv4 in sent frame")
	}
	out.ip = ip
	if header.Checksum(ip.Header(), 0) != 0 {
		t.Fatalf("bad IPv4 header checksum")
	}
	switch ip.Protocol() {
	case header.ProtoTCP, header.ProtoUDP:
		seg := ip.Payload()
		out.sport, out.dport = header.Ports(seg).Src(), header.Ports(seg).Dst()
		if header.Checksum(seg, header.PseudoSum(ip.Src(), ip.Dst(), ip.Protocol(), len(seg))) != 0 {
			t.Fatalf("bad %d checksum", ip.Protocol())
		}
	case header.ProtoICMP:
		out.icmp = header.ICMP(ip.Payload())
		if header.Checksum(out.icmp, 0) != 0 {
			t.Fatalf("bad ICMP checksum")
		}
	}
	return out
}

func (p parsed) src() [4]byte { return p.ip.Src() }
func (p parsed) dst() [4]byte { return p.ip.Dst() }

// natConfig is Genode's nic_router-nat shape: an uplink with NAT and a port forward, a
// default domain with DHCP server and permit-any rules.
const natConfig = `<config verbose_packet_drop="yes">
  <policy label="uplink" domain="uplink"/>
  <default-policy domain="default"/>
  <report link_state="yes"/>
  <domain name="uplink" interface="198.18.0.10/24" gateway="198.18.0.1">
    <nat domain="default" tcp-ports="2" udp-ports="2" icmp-ids="2"/>
    <tcp-forward port="80" domain="default" to="10.0.1.5" to_port="8080"/>
  </domain>
  <domain name="default" interface="10.0.1.1/24">
    <dhcp-server ip_first="10.0.1.2" ip_last="10.0.1.4" ip_lease_time_sec="100">
      <dns-server ip="198.18.0.53"/>
      <dns-domain name="example.org"/>
    </dhcp-server>
    <tcp dst="0.0.0.0/0"><permit-any domain="uplink"/></tcp>
    <udp dst="0.0.0.0/0"><permit-any domain="uplink"/></udp>
    <icmp dst="0.0.0.0/0" domain="uplink"/>
  </domain>
</config>`

// natBench attaches a VM and an uplink and teaches the router the gateway's and the VM's
// MACs.
func natBench(t testing.TB) (*bench, *Interface, *fakePort, *Interface, *fakePort) {
	b := newBench(t, natConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	up, upp := b.attach("uplink", Uplink, macUplink)
	b.send(up, arpFrame(header.ARPReply, macGateway, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink))
	b.send(vm, arpFrame(header.ARPReply, vm.MAC(), ip4("10.0.1.2"), routerMACNic, ip4("10.0.1.1"), routerMACNic))
	vmp.take()
	upp.take()
	return b, vm, vmp, up, upp
}
