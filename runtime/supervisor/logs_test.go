package supervisor

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestOutputPrefixesLines(t *testing.T) {
	var b bytes.Buffer
	w := NewOutput(&b, false).Writer("nic_router")
	w.Write([]byte("one\ntw"))
	w.Write([]byte("o\r\n"))
	if got := b.String(); got != "[nic_router] one\n[nic_router] two\n" {
		t.Errorf("got %q", got)
	}
}

func TestOutputJSON(t *testing.T) {
	var b bytes.Buffer
	w := NewOutput(&b, true).Writer("vm")
	w.Write([]byte("plain text\n{\"msg\":\"structured\",\"n\":1}\n"))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %q", b.String())
	}
	for i, want := range []string{"plain text", "structured"} {
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil || m["component"] != "vm" || m["msg"] != want {
			t.Errorf("line %d: %q (%v)", i, lines[i], err)
		}
	}
}
