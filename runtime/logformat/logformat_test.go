package logformat

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestDurations(t *testing.T) {
	var text, js bytes.Buffer
	slog.New(Handler(&text, Text, slog.LevelInfo)).Info("restart", "wait", 1500*time.Millisecond)
	slog.New(Handler(&js, JSON, slog.LevelInfo)).Info("restart", "wait", 1500*time.Millisecond)
	if got := text.String(); got != "level=INFO msg=restart wait=1.5s\n" {
		t.Errorf("text: %q", got)
	}
	var obj map[string]any
	if err := json.Unmarshal(js.Bytes(), &obj); err != nil || obj["wait"] != 1.5 || !strings.Contains(js.String(), `"time":`) {
		t.Errorf("json: %v %s", err, js.String())
	}
}
