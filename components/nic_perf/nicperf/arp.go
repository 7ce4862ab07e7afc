package nicperf

import (
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// arpRetry is how long the generator waits for the answer to its ARP request before it asks
// again, as Genode's packet generator does.
const arpRetry = time.Second

// answerARP answers a request for the session's address.
func (p *Perf) answerARP(out *packetstream.Source, a header.ARP) {
	buf := p.alloc(out, header.EthLen+header.ARPLen)
	if buf == nil {
		return
	}
	e := header.Eth(buf)
	e.SetDst(a.SenderMAC())
	e.SetSrc(p.cfg.MAC)
	e.SetType(header.EtherTypeARP)
	header.PutARP(e.Payload(), header.ARPReply, p.cfg.MAC, p.ip, a.SenderMAC(), a.SenderIP())
	p.submit(out)
	p.answers++
}

// resolve asks for the MAC of the generator's destination when due (at once, then each
// arpRetry until answered) and returns when it asks next.
func (p *Perf) resolve(out *packetstream.Source, now time.Time) time.Time {
	if now.Before(p.arpDue) {
		return p.arpDue
	}
	if buf := p.alloc(out, header.EthLen+header.ARPLen); buf != nil {
		e := header.Eth(buf)
		e.SetDst(header.Broadcast)
		e.SetSrc(p.cfg.MAC)
		e.SetType(header.EtherTypeARP)
		header.PutARP(e.Payload(), header.ARPRequest, p.cfg.MAC, p.ip, header.Broadcast, p.cfg.DstIP)
		p.submit(out)
	}
	p.arpDue = now.Add(arpRetry)
	return p.arpDue
}

// arpReply takes the answer to the generator's request: from then on it sends to that MAC.
func (p *Perf) arpReply(a header.ARP) {
	if p.resolved || !p.cfg.ResolveDstMAC || a.SenderIP() != p.cfg.DstIP {
		return
	}
	p.dstMAC, p.resolved, p.template = a.SenderMAC(), true, nil
}
