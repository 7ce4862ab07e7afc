package testpmd

import (
	"strings"
	"testing"

	"github.com/nicstack/nicstack/runtime/config"
)

// The scenario parses, puts every component on the CPU asked for, gives each vm its socket and
// queue pairs, and routes the generator's domain to the sink's.
func TestThrough(t *testing.T) {
	s := Through{GenSock: "/run/g.sock", SinkSock: "/run/s.sock", Queues: 2, CPU: 0, Restart: true}.XML()
	if _, err := config.Parse("through.xml", []byte(s)); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
	for _, w := range []string{`socket="/run/g.sock" queues="2"`, `socket="/run/s.sock" queues="2"`, `restart="yes"`,
		`<udp dst="10.0.2.0/24"> <permit-any domain="rx"/>`, `<policy label_prefix="vm_tx" domain="tx"/>`} {
		if !strings.Contains(s, w) {
			t.Errorf("scenario lacks %q", w)
		}
	}
	if strings.Count(s, `<affinity xpos="0" ypos="0"/>`) != 3 {
		t.Errorf("not all three on CPU 0:\n%s", s)
	}
	if s := (Through{CPU: -1}).XML(); strings.Contains(s, "affinity") || !strings.Contains(s, `queues="1"`) {
		t.Errorf("without placement or queues:\n%s", s)
	}
}
