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

// TestOutputGenode: lines as Genode's log shows them, the supervisor's "[init] ", a
// component's "[init -> NAME] " (also one named init), warnings and errors as Genode prints
// them; the observer sees each line with its child ("" for the supervisor's).
func TestOutputGenode(t *testing.T) {
	var b bytes.Buffer
	var seen []string
	o := NewGenodeOutput(&b, func(child, text string) { seen = append(seen, child+"|"+text) })
	log := o.Logger(false)
	log.Info(`child "client" exited with exit value 0`)
	log.Warn("no route", "service", "Nic", "label", "a b")
	log.Debug("not shown")
	o.Writer("client").Write([]byte("Error: lost\n"))
	o.Writer("init").Write([]byte("nested\n"))
	want := `[init] child "client" exited with exit value 0
[init] Warning: no route service=Nic label="a b"
[init -> client] Error: lost
[init -> init] nested
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	if got := strings.Join(seen, "\n"); got != `|child "client" exited with exit value 0
|Warning: no route service=Nic label="a b"
client|Error: lost
init|nested` {
		t.Errorf("observed:\n%s", got)
	}
}
