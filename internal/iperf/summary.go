package iperf

// summarize reports the whole test as iperf3's iperf_print_results does: per stream and per
// direction, the sender's and the receiver's view, in text and in the report's end. A server
// summarizes before the results exchange, so it knows only its own side, as iperf3's does.
func (t *test) summarize() {
	o := t.out
	e := &t.rep.End
	e.Streams = []EndStream{}
	bidir := t.mode == modeBidir
	o.printf("%s", separator)
	switch {
	case t.udp:
		o.printf("%s", header(headerUDP, bidir))
	case t.senderHasRetransmits == 1 || t.otherSideHasRetransmits == 1:
		o.printf("%s", header(headerBWRetr, bidir))
	default:
		o.printf("%s", header(headerBW, bidir))
	}
	if len(t.streams) == 0 {
		return
	}
	// iperf3 takes both ends' times from the first stream, the receiver's from the peer's
	// results when it has them.
	endTime := t.end.Sub(t.start).Seconds()
	first := t.streams[0]
	peerTime := first.peer.EndTime - first.peer.StartTime
	senderTime, receiverTime := endTime, peerTime
	if !first.sender {
		senderTime, receiverTime = peerTime, endTime
	}
	if senderTime <= 0 {
		senderTime = endTime
	}
	if receiverTime <= 0 {
		receiverTime = endTime
	}
	perSec := func(b uint64, secs float64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(b) / secs
	}
	server := !t.client
	for _, sender := range t.groups() {
		hasRetr := t.senderHasRetransmits == 1
		if bidir && !sender {
			hasRetr = t.otherSideHasRetransmits == 1
		}
		role := t.roleTag(sender)
		var totalSent, totalReceived, totalRetrans uint64
		var totalPackets, senderPackets, receiverPackets, lost int64
		var jitter float64
		for _, s := range t.streams {
			if s.sender != sender {
				continue
			}
			v := s.view()
			totalSent += v.sent
			totalReceived += v.received
			totalRetrans += v.retrans
			packets := v.senderPackets
			if packets == 0 {
				packets = v.receiverPackets
			}
			totalPackets += packets - s.omitted.packets
			senderPackets += v.senderPackets - s.omitted.packets
			receiverPackets += v.receiverPackets - s.omitted.packets
			lost += v.lost - s.omitted.lost
			jitter += v.jitter

			sendRate := perSec(v.sent, senderTime)
			var es EndStream
			if t.udp {
				streamLost := v.lost - s.omitted.lost
				sentPackets := v.senderPackets - s.omitted.packets
				pct := lostPercent(streamLost, sentPackets)
				ooo := s.final.ooo - s.omitted.ooo
				es.UDP = &Sum{Socket: s.id, End: senderTime, Seconds: senderTime, Bytes: v.sent, BitsPerSecond: sendRate * 8,
					JitterMs: ptr(v.jitter * 1000), LostPackets: ptr(streamLost), Packets: ptr(packets - s.omitted.packets),
					LostPercent: ptr(pct), OutOfOrder: ptr(ooo), Sender: sender}
				if !(server && !s.sender) {
					o.printf("%s", o.line(s.id, role, 0, senderTime, v.sent, sendRate)+udpTail(0, 0, sentPackets, 0, "sender"))
				}
				if ooo > 0 {
					o.printf(outOfOrderFormat, role, 0.0, senderTime, ooo)
				}
				if !(server && s.sender) {
					got := v.receiverPackets - s.omitted.packets
					o.printf("%s", o.line(s.id, role, 0, receiverTime, v.received, perSec(v.received, receiverTime))+
						udpTail(v.jitter*1000, streamLost, got, lostPercent(streamLost, got), "receiver"))
				}
			} else {
				snd := &Sum{Socket: s.id, End: senderTime, Seconds: senderTime, Bytes: v.sent, BitsPerSecond: sendRate * 8, Sender: sender}
				if hasRetr {
					tc := s.tcp
					mean := uint64(0)
					if tc.countRTT > 0 {
						mean = tc.sumRTT / tc.countRTT
					}
					snd.Retransmits, snd.MaxSndCwnd, snd.MaxSndWnd = ptr(v.retrans), ptr(tc.maxCwnd), ptr(tc.maxWnd)
					snd.MaxRTT, snd.MinRTT, snd.MeanRTT = ptr(tc.maxRTT), ptr(tc.minRTT), ptr(mean)
				}
				es.Sender = snd
				es.Receiver = &Sum{Socket: s.id, End: receiverTime, Seconds: endTime, Bytes: v.received,
					BitsPerSecond: perSec(v.received, receiverTime) * 8, Sender: sender}
				if !(server && !s.sender) {
					tail := plainTail("sender")
					if hasRetr {
						tail = retransTail(v.retrans, "sender")
					}
					o.printf("%s", o.line(s.id, role, 0, senderTime, v.sent, sendRate)+tail)
				}
				if !(server && s.sender) {
					o.printf("%s", o.line(s.id, role, 0, receiverTime, v.received, perSec(v.received, receiverTime))+plainTail("receiver"))
				}
			}
			e.Streams = append(e.Streams, es)
		}

		sendRate, receiveRate := perSec(totalSent, senderTime), perSec(totalReceived, receiverTime)
		sent := &Sum{End: senderTime, Seconds: senderTime, Bytes: totalSent, BitsPerSecond: sendRate * 8, Sender: sender}
		received := &Sum{End: receiverTime, Seconds: receiverTime, Bytes: totalReceived, BitsPerSecond: receiveRate * 8, Sender: sender}
		var sum *Sum
		text := t.p.Parallel > 1
		if t.udp {
			jitter /= float64(t.p.Parallel)
			pct := lostPercent(lost, totalPackets)
			sum = &Sum{End: receiverTime, Seconds: receiverTime, Bytes: totalSent, BitsPerSecond: sendRate * 8,
				JitterMs: ptr(jitter * 1000), LostPackets: ptr(lost), Packets: ptr(totalPackets), LostPercent: ptr(pct), Sender: sender}
			sent.JitterMs, sent.LostPackets, sent.Packets, sent.LostPercent, sent.Sender = ptr(0.0), ptr(int64(0)), ptr(senderPackets), ptr(0.0), true
			received.JitterMs, received.LostPackets, received.Packets, received.LostPercent, received.Sender = ptr(jitter*1000), ptr(lost), ptr(receiverPackets), ptr(pct), false
			if text && !(server && !sender) {
				o.printf("%s", o.line(0, role, 0, senderTime, totalSent, sendRate)+udpTail(0, 0, senderPackets, 0, "sender"))
			}
			if text && !(server && sender) {
				o.printf("%s", o.line(0, role, 0, receiverTime, totalReceived, receiveRate)+udpTail(jitter*1000, lost, receiverPackets, pct, "receiver"))
			}
		} else {
			tail := plainTail("sender")
			if hasRetr {
				sent.Retransmits = ptr(totalRetrans)
				tail = retransTail(totalRetrans, "sender")
			}
			if text && !(server && !sender) {
				o.printf("%s", o.line(0, role, 0, senderTime, totalSent, sendRate)+tail)
			}
			if text && !(server && sender) {
				o.printf("%s", o.line(0, role, 0, receiverTime, totalReceived, receiveRate)+plainTail("receiver"))
			}
		}
		if t.reverseName(sender) {
			e.SumBidirReverse, e.SumSentBidirReverse, e.SumReceivedBidirReverse = sum, sent, received
		} else {
			e.Sum, e.SumSent, e.SumReceived = sum, sent, received
		}
	}
	e.CPU = &CPU{HostTotal: t.cpu.total, HostUser: t.cpu.user, HostSystem: t.cpu.sys,
		RemoteTotal: t.peerCPU.total, RemoteUser: t.peerCPU.user, RemoteSystem: t.peerCPU.sys}
	if !t.udp {
		// Named for the direction iperf3 reports last: this side's own algorithm is the
		// sender's when that direction's streams send from here.
		groups := t.groups()
		local, remote := t.congestionUsed, t.peerCongestionUsed
		if groups[len(groups)-1] {
			e.SenderTCPCongestion, e.ReceiverTCPCongestion = local, remote
		} else {
			e.SenderTCPCongestion, e.ReceiverTCPCongestion = remote, local
		}
	}
}

// streamView is one stream's totals from both ends, as far as this side knows them.
type streamView struct {
	sent, received                 uint64
	senderPackets, receiverPackets int64
	lost                           int64
	jitter                         float64
	retrans                        uint64
}

// view joins what this side counted for s with what the peer reported (nothing yet on a
// server, which summarizes before the exchange).
func (s *stream) view() streamView {
	own := s.final.bytes - s.omitted.bytes
	peerBytes := uint64(count(s.peer.Bytes))
	if s.sender {
		return streamView{sent: own, received: peerBytes, senderPackets: s.final.packets, receiverPackets: count(s.peer.Packets),
			lost: count(s.peer.Errors), jitter: s.peer.Jitter, retrans: s.tcp.retrans}
	}
	_, _, _, jitter := s.rx.counts()
	return streamView{sent: peerBytes, received: own, senderPackets: count(s.peer.Packets), receiverPackets: s.final.packets,
		lost: s.final.lost, jitter: jitter, retrans: uint64(count(s.peer.Retransmits))}
}
