package supervisor

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nicstack/nicstack/runtime/logformat"
)

// Output is the terminal all components and the supervisor log to: one line at a time,
// prefixed "[name] ", as JSON objects with --log-format json, or as Genode's log shows them
// (NewGenodeOutput).
type Output struct {
	mu      sync.Mutex
	w       io.Writer
	format  string // logformat.Text, JSON or Genode
	observe func(child, text string)
}

// NewOutput writes to w, text lines or JSON.
func NewOutput(w io.Writer, json bool) *Output {
	if json {
		return &Output{w: w, format: logformat.JSON}
	}
	return &Output{w: w, format: logformat.Text}
}

// NewGenodeOutput writes to w (nil: nowhere) the lines Genode's log would show: the
// supervisor's "[init] text", a component's "[init -> NAME] text", warnings and errors
// starting "Warning: " and "Error: ". observe, when not nil, gets each line as well, with
// child "" for the supervisor's own.
func NewGenodeOutput(w io.Writer, observe func(child, text string)) *Output {
	return &Output{w: w, format: logformat.Genode, observe: observe}
}

// line writes one line of a component (or, own, of the supervisor itself).
func (o *Output) line(name string, own bool, text []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch o.format {
	case logformat.Text:
		o.w.Write(append(append([]byte("["+name+"] "), text...), '\n'))
		return
	case logformat.Genode:
		child, prefix := name, "[init -> "+name+"] "
		if own {
			child, prefix = "", "[init] "
		}
		if o.observe != nil {
			o.observe(child, string(text))
		}
		if o.w != nil {
			o.w.Write(append(append([]byte(prefix), text...), '\n'))
		}
		return
	}
	var obj map[string]any
	if json.Unmarshal(text, &obj) == nil && obj != nil {
		obj["component"] = name // a JSON line of a component: tag it
		b, _ := json.Marshal(obj)
		o.w.Write(append(b, '\n'))
		return
	}
	b, _ := json.Marshal(struct {
		Time      string `json:"time"`
		Component string `json:"component"`
		Msg       string `json:"msg"`
	}{time.Now().UTC().Format(time.RFC3339Nano), name, string(text)})
	o.w.Write(append(b, '\n'))
}

// Writer returns a writer whose complete lines go out as component name's.
func (o *Output) Writer(name string) io.Writer { return &lineWriter{o: o, name: name} }

type lineWriter struct {
	o    *Output
	name string
	own  bool // the supervisor's own lines
	mu   sync.Mutex
	buf  []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.o.line(l.name, l.own, bytes.TrimRight(l.buf[:i], "\r"))
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

// Logger returns the supervisor's own logger on o, as component "init". Debug messages (the
// session and routing decisions) show only when verbose.
func (o *Output) Logger(verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	if o.format == logformat.JSON {
		return slog.New(logformat.Handler(lockedWriter{o}, logformat.JSON, level)).With("component", "init")
	}
	return slog.New(logformat.Handler(&lineWriter{o: o, name: "init", own: true}, o.format, level))
}

type lockedWriter struct{ o *Output }

func (l lockedWriter) Write(p []byte) (int, error) {
	l.o.mu.Lock()
	defer l.o.mu.Unlock()
	return l.o.w.Write(p)
}
