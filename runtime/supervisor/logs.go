package supervisor

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nicstack/nicstack/internal/logformat"
)

// Output is the terminal all components and the supervisor log to: one line at a time,
// prefixed "[name] ", or as JSON objects with --log-format json.
type Output struct {
	mu   sync.Mutex
	w    io.Writer
	json bool
}

// NewOutput writes to w.
func NewOutput(w io.Writer, json bool) *Output { return &Output{w: w, json: json} }

func (o *Output) line(name string, text []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.json {
		o.w.Write(append(append([]byte("["+name+"] "), text...), '\n'))
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

// Writer returns a writer whose complete lines go out prefixed with name.
func (o *Output) Writer(name string) io.Writer { return &lineWriter{o: o, name: name} }

type lineWriter struct {
	o    *Output
	name string
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
		l.o.line(l.name, bytes.TrimRight(l.buf[:i], "\r"))
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
	if o.json {
		return slog.New(logformat.Handler(lockedWriter{o}, true, level)).With("component", "init")
	}
	return slog.New(logformat.Handler(o.Writer("init"), false, level))
}

type lockedWriter struct{ o *Output }

func (l lockedWriter) Write(p []byte) (int, error) {
	l.o.mu.Lock()
	defer l.o.mu.Unlock()
	return l.o.w.Write(p)
}
