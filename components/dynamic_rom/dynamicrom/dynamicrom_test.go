package dynamicrom

import (
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/runtime/config"
)

func parse(t *testing.T, text string) (Config, error) {
	t.Helper()
	n, err := config.Parse("dynamic_rom.xml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return ParseConfig(n, "dynamic_rom")
}

// The timeline of Genode's README: each <inline> replaces the content, <empty/> removes the
// module, <sleep> waits, and the end starts over; a session picks its <rom> by the last
// element of its label (a route's label rewrite included).
func TestTimelineRunsUntilEachSleepAndStartsOver(t *testing.T) {
	cfg, err := parse(t, `<config verbose="yes"> <rom name="x.config">
		<inline description="one"> <config a="1"/> </inline> <sleep milliseconds="100"/>
		<empty/> <inline> <config a="2"/> </inline> <sleep milliseconds="200"/>
	</rom> </config>`)
	if err != nil {
		t.Fatal(err)
	}
	rom := cfg.Lookup("nic_router -> x.config")
	if rom == nil || cfg.Lookup("x.config") != rom || cfg.Lookup("nic_router -> config") != nil {
		t.Fatal("lookup by the label's last element")
	}
	tl := NewTimeline(rom)
	var got, logs []string
	change := func(c []byte) {
		if c == nil {
			got = append(got, "empty")
		} else {
			got = append(got, string(c))
		}
	}
	log := func(l string) { logs = append(logs, l) }
	var sleeps []time.Duration
	for range 3 {
		sleeps = append(sleeps, tl.Run(change, log))
	}
	want := []string{`<config a="1"/>`, "empty", `<config a="2"/>`, `<config a="1"/>`}
	for i := range want {
		if i >= len(got) || !strings.HasPrefix(got[i], want[i]) {
			t.Fatalf("changes %q, want %q", got, want)
		}
	}
	if sleeps[0] != 100*time.Millisecond || sleeps[1] != 200*time.Millisecond || sleeps[2] != 100*time.Millisecond {
		t.Errorf("sleeps %v", sleeps)
	}
	if logs[0] != "x.config: change (one)" || logs[1] != "x.config: sleep 100 milliseconds" || logs[2] != "x.config: remove" || logs[3] != "x.config: change" {
		t.Errorf("log %q", logs)
	}
}

// What Genode's would spin on or serve nothing from is refused, naming the line.
func TestBadTimelinesAreRefused(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`<config> <rom name="x"> <inline> <a/> </inline> </rom> </config>`, `dynamic_rom.xml:1:11: <rom name="x"> has no <sleep>`},
		{`<config> <rom name="x"> <inline> <a/> <b/> </inline> <sleep milliseconds="1"/> </rom> </config>`, "holds 2 nodes"},
		{`<config> <rom name="x"> <sleep milliseconds="0"/> </rom> </config>`, "milliseconds above 0"},
		{`<config> <rom> <sleep milliseconds="1"/> </rom> </config>`, "needs a name"},
	} {
		if _, err := parse(t, c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.text, err, c.want)
		}
	}
}
