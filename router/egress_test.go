package router

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// fakePort is a QueuePort too: a frame it is asked to hold gets a fresh buffer, and what is
// submitted is sent (recorded); the peer acknowledges at once unless manual is set, when ack
// does.
func (p *fakePort) Hold(n int) (uint64, []byte, bool) {
	if p.full || p.capacity > 0 && len(p.sent)+p.holding >= p.capacity {
		return 0, nil, false
	}
	p.holding++
	p.bufs = append(p.bufs, make([]byte, n))
	return uint64(len(p.bufs) - 1), p.bufs[len(p.bufs)-1], true
}

func (p *fakePort) SubmitHeld(id uint64, n int, off *netdev.Offload) bool {
	p.holding--
	p.sent = append(p.sent, p.bufs[id][:n])
	p.offs = append(p.offs, *off)
	if p.manual {
		p.inflight = append(p.inflight, n)
	}
	return true
}

func (p *fakePort) Discard(uint64) { p.holding--; p.discarded++ }

func (p *fakePort) Unacked() (frames, bytes int) {
	for _, n := range p.inflight {
		bytes += n
	}
	return len(p.inflight), bytes
}

func (p *fakePort) Buffer() (frames, bytes int) { return 1024, 1024 * 1600 }

// ack acknowledges the n oldest frames in flight.
func (p *fakePort) ack(n int) { p.inflight = p.inflight[min(n, len(p.inflight)):] }

// fqBench is natBench's shape with <fq-codel attrs/> in the uplink domain and two VMs
// (10.0.1.2 and 10.0.1.3) in the default one; the uplink's peer acknowledges only on ack.
func fqBench(t testing.TB, attrs string) (b *bench, vm, vm2, up *Interface, upp *fakePort) {
	t.Helper()
	b = newBench(t, strings.Replace(natConfig, `gateway="198.18.0.1">`, `gateway="198.18.0.1">
    <fq-codel `+attrs+`/>`, 1))
	vm, _ = b.attach("vm", Nic, header.MAC{})
	vm2, _ = b.attach("vm2", Nic, header.MAC{})
	up, upp = b.attach("uplink", Uplink, macUplink)
	upp.manual = true
	b.send(up, arpFrame(header.ARPReply, macGateway, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink))
	if up.eg == nil {
		t.Fatal("no egress queue at the uplink")
	}
	return b, vm, vm2, up, upp
}

// bulkFrame is a 1000-byte UDP frame of the bulk flow from vm (10.0.1.2), ECN-capable
// (ECT(0)) when ect.
func bulkFrame(vm *Interface, ect bool) []byte {
	f := udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 9, make([]byte, 1000-14-28))
	if ect {
		ip := header.IPv4(f[header.EthLen:])
		ip[1] |= 2
		ip.SetChecksum(0)
		ip.SetChecksum(header.Checksum(ip.Header(), 0))
	}
	return f
}

// TestFQCodelSparseFirst: a bulk flow from one guest fills the uplink's queue; the byte
// queue limit keeps all but a frame or two of it in the router, where the other guest's sparse
// frame, arriving last, is the first to leave once the peer acknowledges. The queue's depth
// has the oldest frame's sojourn, a bulk one's, before and after the sparse frame leaves. Acknowledgements
// release the limit, which grows when the peer ran dry while frames waited.
func TestFQCodelSparseFirst(t *testing.T) {
	b, vm, vm2, up, upp := fqBench(t, "")
	bulk := bulkFrame(vm, false)
	for range 40 {
		b.r.Handle(vm, bulk, nil, 0)
	}
	b.r.Flush()
	b.clock.advance(2 * time.Millisecond)
	sparse := udpFrameT(vm2.MAC(), routerMACNic, ip4("10.0.1.3"), ip4("198.18.1.1"), 6000, 7, []byte{1})
	b.r.Handle(vm2, sparse, nil, 0)
	b.r.Flush()
	first := len(upp.take())
	if first == 0 || first > 2 {
		t.Fatalf("%d frames submitted at first, want the limit's 1 or 2", first)
	}
	b.clock.advance(3 * time.Millisecond)
	if d := up.Queued(b.clock.t); d.Frames != uint64(41-first) || d.Bytes != uint64(40-first)*1000+43 || d.Sojourn != 5*time.Millisecond {
		t.Fatalf("queue %+v, want %d frames, the oldest (bulk) 5ms", d, 41-first)
	}
	b.r.Flush()
	if n := len(upp.take()); n != 0 {
		t.Fatalf("%d frames submitted with nothing acknowledged", n)
	}
	upp.ack(first)
	b.r.Flush()
	sent := upp.take()
	if len(sent) == 0 || parse(t, sent[0]).dport != 7 {
		t.Fatalf("first frame after the acknowledgement is not the sparse one (%d sent)", len(sent))
	}
	if d := up.Queued(b.clock.t); d.Sojourn != 5*time.Millisecond {
		t.Fatalf("queue %+v after the sparse frame left, want the oldest bulk frame's 5ms", d)
	}
	if up.eg.bql.Limit() <= 1514 {
		t.Error("the byte queue limit did not grow when the peer ran dry")
	}
	for n := 0; up.Queued(b.clock.t).Frames > 0; n++ {
		if n > 100 {
			t.Fatal("queue does not drain")
		}
		upp.ack(len(upp.inflight))
		b.r.Flush()
	}
	if d := up.Queued(b.clock.t); d != (netdev.Depth{}) {
		t.Errorf("queue %+v when empty", d)
	}
	if got := up.Stats().TxFrames.Load(); got != 41 {
		t.Errorf("%d frames sent, want 41", got)
	}
	if upp.holding != 0 {
		t.Errorf("%d buffers still held", upp.holding)
	}
}

// TestFQCodelDropsAndMarks: over the limit the scheduler drops from the bulk flow and frees
// its buffers; a standing queue makes CoDel mark ECN-capable frames CE (the IPv4 checksum
// kept valid) and drop the others, each counted at the interface and the router.
func TestFQCodelDropsAndMarks(t *testing.T) {
	b, vm, _, up, upp := fqBench(t, `limit="8"`)
	for range 30 {
		b.r.Handle(vm, bulkFrame(vm, false), nil, 0)
	}
	b.r.Flush()
	over := up.Stats().Overlimit.Load()
	if over == 0 || upp.discarded != int(over) || b.r.Stats().Overlimit.Load() != over {
		t.Fatalf("overlimit %d (router %d), %d buffers discarded", over, b.r.Stats().Overlimit.Load(), upp.discarded)
	}
	if q := up.Queued(b.clock.t).Frames; q > 8 {
		t.Fatalf("%d frames queued over a limit of 8", q)
	}

	for _, ect := range []bool{true, false} {
		b, vm, _, up, upp := fqBench(t, `target_us="1000" interval_us="10000"`)
		for range 40 {
			b.r.Handle(vm, bulkFrame(vm, ect), nil, 0)
		}
		b.r.Flush()
		var ce int
		for range 3 {
			b.clock.advance(6e6) // 6 ms a round: sojourn above target from the first
			upp.ack(len(upp.inflight))
			b.r.Flush()
			for _, f := range upp.take() {
				if parse(t, f).ip[1]&3 == 3 {
					ce++
				}
			}
		}
		marked, dropped := up.Stats().CoDelMarked.Load(), up.Stats().CoDelDropped.Load()
		if ect && (marked == 0 || dropped != 0 || ce != int(marked) || b.r.Stats().CoDelMarked.Load() != marked) {
			t.Errorf("ECT: %d marked (%d with CE seen), %d dropped", marked, ce, dropped)
		}
		if !ect && (dropped == 0 || marked != 0 || ce != 0 || upp.discarded != int(dropped) || b.r.Stats().CoDelDropped.Load() != dropped) {
			t.Errorf("not ECT: %d dropped (%d discarded), %d marked", dropped, upp.discarded, marked)
		}
	}
}

// TestFQCodelDetach: a guest that goes takes its queued frames with it; the uplink's queue
// going (a config without <fq-codel>) frees every buffer it held, and frames are sent at
// once again.
func TestFQCodelDetach(t *testing.T) {
	b, vm, vm2, up, upp := fqBench(t, "")
	for range 10 {
		b.r.Handle(vm, bulkFrame(vm, false), nil, 0)
		b.r.Handle(vm2, udpFrameT(vm2.MAC(), routerMACNic, ip4("10.0.1.3"), ip4("198.18.1.1"), 6000, 7, []byte{1}), nil, 0)
	}
	b.r.Flush()
	before := up.Queued(b.clock.t).Frames
	b.r.Detach(vm)
	if got := up.Queued(b.clock.t).Frames; got >= before || got == 0 || upp.holding != int(got) {
		t.Fatalf("queued %d before, %d after detaching the bulk guest, %d buffers held", before, got, upp.holding)
	}
	b.r.Configure(modelOf(t, natConfig))
	if up.eg != nil || upp.holding != 0 || up.Queued(b.clock.t).Frames != 0 {
		t.Fatalf("queue left: %v, %d buffers held", up.eg != nil, upp.holding)
	}
	upp.take()
	b.send(vm2, udpFrameT(vm2.MAC(), routerMACNic, ip4("10.0.1.3"), ip4("198.18.1.1"), 6000, 7, []byte{1}))
	if len(upp.take()) != 1 {
		t.Fatal("not sent at once without <fq-codel>")
	}
}

// queueBenchPort is a QueuePort over a fixed set of buffers, as a packet stream's bulk
// buffer: it allocates nothing per frame. Everything submitted is acknowledged at ackAll.
type queueBenchPort struct {
	benchPort
	bufs     [][]byte
	free     []uint64
	inflight []uint64
	bytes    int
}

func newQueueBenchPort(n int) *queueBenchPort {
	p := &queueBenchPort{benchPort: benchPort{buf: make([]byte, 2048)}, free: make([]uint64, 0, n), inflight: make([]uint64, 0, n)}
	for k := range n {
		p.bufs = append(p.bufs, make([]byte, 2048))
		p.free = append(p.free, uint64(k))
	}
	return p
}

func (p *queueBenchPort) Hold(n int) (uint64, []byte, bool) {
	if len(p.free) == 0 {
		return 0, nil, false
	}
	id := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return id, p.bufs[id][:n], true
}

func (p *queueBenchPort) SubmitHeld(id uint64, n int, _ *netdev.Offload) bool {
	p.inflight = append(p.inflight, id)
	p.bytes += n
	p.sent++
	return true
}

func (p *queueBenchPort) Discard(id uint64)            { p.free = append(p.free, id) }
func (p *queueBenchPort) Unacked() (frames, bytes int) { return len(p.inflight), p.bytes }
func (p *queueBenchPort) Buffer() (frames, bytes int)  { return len(p.bufs), len(p.bufs) * 1600 }
func (p *queueBenchPort) ackAll() {
	p.free = append(p.free, p.inflight...)
	p.inflight, p.bytes = p.inflight[:0], 0
}

// TestFQCodelForwardingDoesNotAllocate: with <fq-codel> at the uplink, a frame of an
// established NAT link state is queued, dequeued and submitted without an allocation.
func TestFQCodelForwardingDoesNotAllocate(t *testing.T) {
	b := newBench(t, strings.Replace(natConfig, `gateway="198.18.0.1">`, `gateway="198.18.0.1"><fq-codel/>`, 1))
	vm, _ := b.attach("vm", Nic, header.MAC{})
	qp := newQueueBenchPort(64)
	up := b.r.Attach(Session{Label: "uplink", Kind: Uplink, MAC: macUplink, Port: qp})
	b.send(up, arpFrame(header.ARPReply, macGateway, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink))
	out := udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, make([]byte, 100))
	b.send(vm, out)
	qp.ackAll()
	sent := qp.sent
	allocs := testing.AllocsPerRun(200, func() {
		b.r.Handle(vm, out, nil, 0)
		b.r.Handle(vm, out, nil, 0)
		b.r.Flush()
		qp.ackAll()
		b.r.Flush()
	})
	if allocs != 0 || qp.sent-sent < 400 {
		t.Errorf("%.1f allocations per round, %d sent", allocs, qp.sent-sent)
	}
}

// BenchmarkForwardFQCodel is BenchmarkForward's nat case through an uplink with <fq-codel>
// (on) and without (off): each frame is held, queued, picked and submitted as the peer
// acknowledges a batch's frames. One op is one frame; allocs/op must be 0.
func BenchmarkForwardFQCodel(b *testing.B) {
	for _, fq := range []string{"off", "on"} {
		for _, size := range []int{64, 1500} {
			b.Run(fmt.Sprintf("%s/%d", fq, size), func(b *testing.B) {
				cfg := natConfig
				if fq == "on" {
					cfg = strings.Replace(cfg, `gateway="198.18.0.1">`, `gateway="198.18.0.1"><fq-codel/>`, 1)
				}
				r := New(Options{Clock: &fakeClock{t: time.Unix(1, 0)}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
				r.Configure(modelOf(b, cfg))
				vm := r.Attach(Session{Label: "vm", Kind: Nic, Port: &benchPort{buf: make([]byte, 2048)}})
				qp := newQueueBenchPort(256)
				up := r.Attach(Session{Label: "uplink", Kind: Uplink, MAC: macUplink, Port: qp})
				r.Handle(up, arpFrame(header.ARPReply, macGateway, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink), nil, 0)
				out := udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, make([]byte, size-header.EthLen-28))
				r.Handle(vm, out, nil, 0)
				r.Flush()
				qp.ackAll()
				max := r.MaxPacketsPerSignal()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for k := 0; k < b.N; k++ {
					r.Handle(vm, out, nil, 0)
					if k%max == max-1 {
						r.Flush()
						qp.ackAll()
					}
				}
			})
		}
	}
}

// TestFQCodelBQLLimitMax: bql_limit_max caps the byte queue limit below the scheduler: a
// peer that runs dry at every acknowledgement grows the limit without it, and with it the
// frames in flight stay within the cap plus a frame, the rest waiting in the scheduler.
func TestFQCodelBQLLimitMax(t *testing.T) {
	for _, c := range []struct {
		attrs string
		most  uint32 // bytes the limit may reach
	}{{``, 1 << 30}, {`bql_limit_max="3000"`, 3000}} {
		b, vm, _, up, upp := fqBench(t, c.attrs)
		bulk := bulkFrame(vm, false)
		for range 30 {
			for range 8 {
				b.r.Handle(vm, bulk, nil, 0)
			}
			b.r.Flush()
			upp.take()
			if inFlight := up.eg.bql.InFlight(); inFlight > c.most+1043 {
				t.Fatalf("%q: %d bytes in flight, over %d plus a frame", c.attrs, inFlight, c.most)
			}
			upp.ack(len(upp.inflight)) // the peer ran dry: the limit grows
			b.clock.advance(time.Millisecond)
		}
		if c.attrs == "" && up.eg.bql.Limit() <= 3000 {
			t.Errorf("without a cap the limit stayed at %d: the test does not grow it", up.eg.bql.Limit())
		}
		if lim := up.eg.bql.Limit(); lim > c.most {
			t.Errorf("%q: limit %d over the cap", c.attrs, lim)
		}
	}
}
