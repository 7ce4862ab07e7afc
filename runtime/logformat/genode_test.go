package logformat

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
)

// TestGenodeLog: the message first, then its attributes (those of With and WithGroup too);
// warnings and errors start as Genode's warning() and error() print them.
func TestGenodeLog(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(Handler(&b, Genode, slog.LevelInfo)).With("session", 3)
	log.Info("link up", "label", "vm -> ")
	log.WithGroup("tx").Warn("queue full", "drops", 2)
	log.Error("config", "err", errors.New(`bad "mtu"`))
	log.Debug("hidden")
	want := `link up session=3 label="vm -> "
Warning: queue full session=3 tx.drops=2
Error: config session=3 err="bad \"mtu\""
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
