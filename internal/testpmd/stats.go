package testpmd

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Counts are packets and bytes one way.
type Counts struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// Sub is c less earlier: the counts of an interval.
func (c Counts) Sub(earlier Counts) Counts {
	return Counts{c.Packets - earlier.Packets, c.Bytes - earlier.Bytes}
}

// Queue is one queue pair's counts.
type Queue struct {
	RX Counts `json:"rx"`
	TX Counts `json:"tx"`
}

// PortStats is one port's extended statistics.
type PortStats struct {
	Port   int     `json:"port"`
	RX     Counts  `json:"rx"`
	TX     Counts  `json:"tx"`
	Missed uint64  `json:"rx_missed"`  // frames the port dropped for want of room (rx_missed_errors)
	RXErr  uint64  `json:"rx_errors"`  // rx_errors
	TXErr  uint64  `json:"tx_errors"`  // tx_errors
	NoMbuf uint64  `json:"rx_no_mbuf"` // rx_mbuf_allocation_errors
	Queues []Queue `json:"queues"`
}

// Sub is p less earlier, queue by queue.
func (p PortStats) Sub(earlier PortStats) PortStats {
	d := PortStats{Port: p.Port, RX: p.RX.Sub(earlier.RX), TX: p.TX.Sub(earlier.TX),
		Missed: p.Missed - earlier.Missed, RXErr: p.RXErr - earlier.RXErr,
		TXErr: p.TXErr - earlier.TXErr, NoMbuf: p.NoMbuf - earlier.NoMbuf}
	for i, q := range p.Queues {
		var e Queue
		if i < len(earlier.Queues) {
			e = earlier.Queues[i]
		}
		d.Queues = append(d.Queues, Queue{q.RX.Sub(e.RX), q.TX.Sub(e.TX)})
	}
	return d
}

var (
	xstatsHeader = regexp.MustCompile(`NIC extended statistics for port (\d+)`)
	// rx_q0_packets is ethdev's own per-queue counter (drivers that fill it: net_vhost);
	// rx_q0_good_packets the driver's (net_virtio, net_vhost). The driver's wins.
	queueXstat = regexp.MustCompile(`^(rx|tx)_q(\d+)_(good_)?(packets|bytes)$`)
)

// maxQueues bounds the queue index a counter may name (ethdev's RTE_MAX_QUEUES_PER_PORT).
const maxQueues = 1024

// ParseXstats reads "show port xstats all": per port its totals and per-queue counts. Lines
// it does not know (log lines of the EAL between them) are skipped.
func ParseXstats(s string) ([]PortStats, error) {
	var ports []PortStats
	var p *PortStats
	type qkey struct {
		dir  string
		q    int
		good bool
		what string
	}
	var qs map[qkey]uint64
	flush := func() {
		if p == nil {
			return
		}
		n := 0
		for k := range qs {
			n = max(n, k.q+1)
		}
		p.Queues = make([]Queue, n)
		for k, v := range qs {
			if !k.good {
				if _, ok := qs[qkey{k.dir, k.q, true, k.what}]; ok {
					continue
				}
			}
			c := &p.Queues[k.q].RX
			if k.dir == "tx" {
				c = &p.Queues[k.q].TX
			}
			if k.what == "packets" {
				c.Packets = v
			} else {
				c.Bytes = v
			}
		}
		ports = append(ports, *p)
	}
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if m := xstatsHeader.FindStringSubmatch(line); m != nil {
			flush()
			n, _ := strconv.Atoi(m[1])
			p, qs = &PortStats{Port: n}, map[qkey]uint64{}
			continue
		}
		name, val, ok := strings.Cut(line, ": ")
		if p == nil || !ok {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
		if err != nil {
			continue // a log line with a colon
		}
		switch name {
		case "rx_good_packets":
			p.RX.Packets = v
		case "rx_good_bytes":
			p.RX.Bytes = v
		case "tx_good_packets":
			p.TX.Packets = v
		case "tx_good_bytes":
			p.TX.Bytes = v
		case "rx_missed_errors":
			p.Missed = v
		case "rx_errors":
			p.RXErr = v
		case "tx_errors":
			p.TXErr = v
		case "rx_mbuf_allocation_errors":
			p.NoMbuf = v
		default:
			if m := queueXstat.FindStringSubmatch(name); m != nil {
				q, _ := strconv.Atoi(m[2])
				if q >= maxQueues {
					return nil, fmt.Errorf("xstats of port %d: %s names queue %d", p.Port, name, q)
				}
				qs[qkey{m[1], q, m[3] != "", m[4]}] = v
			}
		}
	}
	flush()
	if len(ports) == 0 {
		return nil, fmt.Errorf("no port's extended statistics in testpmd's output %q", tail(s, 300))
	}
	return ports, nil
}

// ForwardStats is what testpmd's forwarding of one port counted: frames a burst could not
// pass on (TX-dropped: the ring was full) are lost at the sender.
type ForwardStats struct {
	Port      int    `json:"port"`
	RX        uint64 `json:"rx"`
	RXDropped uint64 `json:"rx_dropped"`
	TX        uint64 `json:"tx"`
	TXDropped uint64 `json:"tx_dropped"`
}

var (
	forwardHeader = regexp.MustCompile(`Forward statistics for port (\d+)`)
	forwardLine   = regexp.MustCompile(`^(RX|TX)-packets:\s*(\d+)\s+(?:RX|TX)-dropped:\s*(\d+)`)
)

// ParseForwardStats reads "stop"'s per-port forward statistics (the accumulated block for
// all ports is left out).
func ParseForwardStats(s string) []ForwardStats {
	var out []ForwardStats
	var f *ForwardStats
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if m := forwardHeader.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			out = append(out, ForwardStats{Port: n})
			f = &out[len(out)-1]
			continue
		}
		if strings.Contains(line, "Accumulated forward statistics") {
			f = nil
			continue
		}
		m := forwardLine.FindStringSubmatch(line)
		if f == nil || m == nil {
			continue
		}
		pk, _ := strconv.ParseUint(m[2], 10, 64)
		dr, _ := strconv.ParseUint(m[3], 10, 64)
		if m[1] == "RX" {
			f.RX, f.RXDropped = pk, dr
		} else {
			f.TX, f.TXDropped = pk, dr
		}
	}
	return out
}
