package model

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseFQCodel(t *testing.T) {
	def := FQCodel{Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond, Quantum: 1514, Limit: 10240, Flows: 1024, ECN: true}
	for _, c := range []struct {
		xml  string
		want FQCodel
		errs []string
	}{
		{`<fq-codel/>`, def, nil},
		{`<fq-codel target_us="500" interval_us="20000" quantum="9014" limit="2048" memory_limit="4194304" bql_limit_max="125000" flows="256" ecn="no"/>`,
			FQCodel{Target: 500 * time.Microsecond, Interval: 20 * time.Millisecond, Quantum: 9014, Limit: 2048, MemoryLimit: 4194304, BQLLimitMax: 125000, Flows: 256}, nil},
		{`<fq-codel bql_limit_max="2G"/>`, def, []string{"bql_limit_max"}},
		{`<fq-codel target="5"/>`, def, []string{`test:1:11: unknown attribute "target"`}},
		{`<fq-codel quantum="0" flows="65537"/>`, def, []string{"65537 is above 65536", "0 is no quantum"}},
		{`<fq-codel target_us="200000"/>`, def, []string{"target_us 200000 must be above 0 and at most interval_us 100000"}},
		{`<fq-codel target_us="0"/>`, def, []string{"target_us 0 must be above 0"}},
		{`<fq-codel ecn="maybe"/>`, def, []string{"ecn"}},
	} {
		q, errs := ParseFQCodel(parseXML(t, c.xml))
		if q != c.want {
			t.Errorf("%s: %+v, want %+v", c.xml, q, c.want)
		}
		if len(errs) != len(c.errs) {
			t.Errorf("%s: problems %v, want %d", c.xml, errs, len(c.errs))
			continue
		}
		for i, e := range errs {
			if !strings.Contains(e.Error(), c.errs[i]) {
				t.Errorf("%s: problem %q, want %q in it", c.xml, e, c.errs[i])
			}
		}
	}
	// Every attribute documented in the schema is read.
	for _, a := range FQCodelSchema().Attrs {
		if _, errs := ParseFQCodel(parseXML(t, fmt.Sprintf(`<fq-codel %s="x"/>`, a.Name))); len(errs) == 0 {
			t.Errorf("attribute %s not read", a.Name)
		}
	}
}

// TestParseDomainFQCodel: Parse reads a domain's <fq-codel> and reports its problems with
// their position (what `nicstack check` shows); a bad value keeps the domain with the
// default, a second node makes it invalid.
func TestParseDomainFQCodel(t *testing.T) {
	dom := func(inner string) string {
		return `<config><domain name="up" interface="198.18.0.10/24">` + inner + `</domain></config>`
	}
	c, errs := parsed(t, dom(`<fq-codel target_us="2000" ecn="no"/>`))
	if q := c.Domains["up"].FQCodel; len(errs) != 0 || q == nil || q.Target != 2*time.Millisecond || q.ECN || q.Limit != 10240 {
		t.Fatalf("%+v, problems %v", q, errs)
	}
	if c, _ := parsed(t, dom(``)); c.Domains["up"].FQCodel != nil {
		t.Error("a domain without <fq-codel> has one")
	}
	for _, tc := range []struct{ inner, want string }{
		{`<fq-codel quantum="0"/>`, `test:1:64: attribute "quantum" of <fq-codel>: 0 is no quantum`},
		{`<fq-codel tagret_us="1"/>`, `test:1:64: unknown attribute "tagret_us"`},
		{`<fq-codel interval_us="100"/>`, `test:1:55: <fq-codel>: target_us 5000 must be above 0 and at most interval_us 100`},
		{`<fq-codel/><fq-codel/>`, `invalid <fq-codel> at test:1:66: more than one <fq-codel>`},
	} {
		c, errs := parsed(t, dom(tc.inner))
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%s: problems %v, want %q", tc.inner, errs, tc.want)
		}
		if d := c.Domains["up"]; !strings.Contains(tc.inner, "/><fq") && (d == nil || d.FQCodel == nil) {
			t.Errorf("%s: domain or queue lost", tc.inner)
		}
	}
}
