// Package logformat makes the slog handlers the supervisor and every component log with, so
// that one run's lines read the same whoever wrote them.
package logformat

import (
	"io"
	"log/slog"
)

// Handler writes to w as text or as JSON objects. Text has no time (the supervisor prefixes
// each line with its writer's name; journald and terminals add their own time) and shows a
// duration as Go writes it ("1.5s"); JSON shows a duration in seconds, not slog's default
// integer nanoseconds, so log processors read the unit they expect.
func Handler(w io.Writer, json bool, level slog.Leveler) slog.Handler {
	if json {
		return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationSeconds})
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
