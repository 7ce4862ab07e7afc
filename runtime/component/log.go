package component

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
)

// The formats a component (and the supervisor) writes its log lines in; the supervisor tells
// a component which through LogFormatEnv.
const (
	LogText = "text" // slog's key=value lines, without the time
	LogJSON = "json" // one JSON object a line
	// LogGenode is the form of Genode's log, so that a Genode test's patterns match: the
	// message, then its attributes as key=value; a warning starts "Warning: ", an error
	// "Error: ", as Genode's warning() and error() print them.
	LogGenode = "genode"
)

// NewLogger returns a logger writing to w in format (LogText when unknown), each line in one
// Write, leaving out records below level.
func NewLogger(w io.Writer, format string, level slog.Leveler) *slog.Logger {
	switch format {
	case LogJSON:
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
	case LogGenode:
		return slog.New(&genodeHandler{w: w, level: level, mu: &sync.Mutex{}})
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: dropTime}))
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// genodeHandler writes records as Genode's log shows messages.
type genodeHandler struct {
	w      io.Writer
	level  slog.Leveler
	mu     *sync.Mutex // shared by the handlers WithAttrs and WithGroup derive
	attrs  string      // the attributes given to WithAttrs, formatted
	prefix string      // the groups given to WithGroup, "a.b."
}

func (h *genodeHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func (h *genodeHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	switch {
	case r.Level >= slog.LevelError:
		b.WriteString("Error: ")
	case r.Level >= slog.LevelWarn:
		b.WriteString("Warning: ")
	}
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.prefix, a)
		return true
	})
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *genodeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	for _, a := range attrs {
		appendAttr(&b, h.prefix, a)
	}
	c := *h
	c.attrs += b.String()
	return &c
}

func (h *genodeHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix += name + "."
	return &c
}

// appendAttr writes " key=value", the value quoted when it holds blanks, quotes or '='.
func appendAttr(b *strings.Builder, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, g := range v.Group() {
			appendAttr(b, prefix, g)
		}
		return
	}
	if a.Equal(slog.Attr{}) {
		return
	}
	s := v.String()
	if s == "" || strings.ContainsAny(s, " \t\n\"=") {
		s = strconv.Quote(s)
	}
	b.WriteString(" " + prefix + a.Key + "=" + s)
}
