// Package logformat makes the slog handlers the supervisor and every component log with, so
// that one run's lines read the same whoever wrote them.
package logformat

import (
	"io"
	"log/slog"
	"sync"
)

// The formats a run's lines come in.
const (
	Text = "text" // slog's key=value lines
	JSON = "json" // one JSON object a line
	// Genode is the form of Genode's log, so that a Genode test's patterns match: the
	// message, then its attributes as key=value; a warning starts "Warning: ", an error
	// "Error: ", as Genode's warning() and error() print them.
	Genode = "genode"
)

// Handler writes to w in format (Text when unknown), each line in one Write. Text and Genode
// have no time (the supervisor prefixes each line with its writer's name; journald and
// terminals add their own time) and show a duration as Go writes it ("1.5s"); JSON shows a
// duration in seconds, not slog's default integer nanoseconds, so log processors read the
// unit they expect.
func Handler(w io.Writer, format string, level slog.Leveler) slog.Handler {
	switch format {
	case JSON:
		return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationSeconds})
	case Genode:
		return &genodeHandler{w: w, level: level, mu: &sync.Mutex{}}
	}
	return slog.NewTextHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: dropTime})
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func durationSeconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.Float64(a.Key, a.Value.Duration().Seconds())
	}
	return a
}
