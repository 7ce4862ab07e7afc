package model

import (
	"time"

	"github.com/nicstack/nicstack/runtime/config"
)

// FQCodel is a domain's <fq-codel>, our extension (docs/isolation.md): flow queueing with
// CoDel at the egress of each of the domain's interfaces, sessions first, then flows.
// Genode's router has no queue at all.
type FQCodel struct {
	Target      time.Duration // target_us
	Interval    time.Duration // interval_us
	Quantum     int           // bytes a session or flow sends a round
	Limit       int           // frames queued at one egress
	MemoryLimit int           // bytes queued at one egress; 0: no limit of bytes
	// BQLLimitMax caps the byte queue limit below the scheduler, bytes (Linux's limit_max);
	// 0: a quarter of the egress stream's bytes.
	BQLLimitMax int
	Flows       int  // flow buckets per session
	ECN         bool // mark CE instead of dropping ECN-capable frames
}

// FQCodelSchema describes <fq-codel>.
func FQCodelSchema() *Description {
	return &Description{Type: "fq-codel", Attrs: []SchemaAttr{
		{"target_us", "number", "5000"}, {"interval_us", "number", "100000"},
		{"quantum", "number", "1514"}, {"limit", "number", "10240"},
		{"memory_limit", "number", "0"}, {"bql_limit_max", "number", "0"}, {"flows", "number", "1024"},
		{"ecn", "bool", "yes"},
	}}
}

// ParseFQCodel reads an <fq-codel> node. Its problems are as Parse's: a malformed or
// out-of-range value is reported and its default used.
func ParseFQCodel(n *config.Node) (FQCodel, []error) {
	p := &parser{}
	for _, e := range config.Check(n, FQCodelSchema().configSchema()) {
		p.errs = append(p.errs, e)
	}
	return p.fqCodel(n), p.errs
}

// fqCodel reads <fq-codel> whose attribute names were checked already (Parse checks the
// whole config against RouterSchema).
func (p *parser) fqCodel(n *config.Node) FQCodel {
	q := FQCodel{
		Target:      time.Duration(p.number(n, "target_us", 5000, 1e7)) * time.Microsecond,
		Interval:    time.Duration(p.number(n, "interval_us", 100000, 1e8)) * time.Microsecond,
		Quantum:     int(p.number(n, "quantum", 1514, 1<<16)),
		Limit:       int(p.number(n, "limit", 10240, 1<<20)),
		MemoryLimit: int(p.number(n, "memory_limit", 0, 1<<30)),
		BQLLimitMax: int(p.number(n, "bql_limit_max", 0, 1<<30)),
		Flows:       int(p.number(n, "flows", 1024, 1<<16)),
		ECN:         p.boolean(n, "ecn", true),
	}
	for _, z := range []struct {
		name string
		v    *int
		def  int
	}{{"quantum", &q.Quantum, 1514}, {"limit", &q.Limit, 10240}, {"flows", &q.Flows, 1024}} {
		if *z.v == 0 {
			a, _ := n.Attr(z.name)
			p.errorf(a.Pos, "attribute %q of <fq-codel>: 0 is no %s", z.name, z.name)
			*z.v = z.def
		}
	}
	if q.Target <= 0 || q.Interval < q.Target {
		p.errorf(n.Pos, "<fq-codel>: target_us %d must be above 0 and at most interval_us %d; the defaults are used",
			q.Target.Microseconds(), q.Interval.Microseconds())
		q.Target, q.Interval = 5*time.Millisecond, 100*time.Millisecond
	}
	return q
}
