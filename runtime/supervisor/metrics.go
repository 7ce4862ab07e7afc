package supervisor

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// MetricsHandler serves the status in Prometheus's text exposition format, read fresh at each
// scrape. (The format is a few lines of text; writing it directly keeps client_golang's
// dependency tree out of the supervisor.)
func (s *Supervisor) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st, ok := s.Status()
		if !ok {
			http.Error(w, "supervisor stopped", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		WriteMetrics(w, st)
	})
}

type metric struct {
	name, help, typ string
	samples         []string
}

func (m *metric) add(v float64, labels ...string) {
	var b strings.Builder
	b.WriteString(m.name)
	if len(labels) > 0 {
		b.WriteByte('{')
		for i := 0; i < len(labels); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%s", labels[i], strconv.Quote(labels[i+1]))
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	m.samples = append(m.samples, b.String())
}

// WriteMetrics writes st as Prometheus metrics.
func WriteMetrics(w io.Writer, st Status) {
	up := &metric{name: "nicstack_component_up", help: "1 while the component runs.", typ: "gauge"}
	restarts := &metric{name: "nicstack_component_restarts_total", help: "Restarts of the component.", typ: "counter"}
	rss := &metric{name: "nicstack_component_rss_bytes", help: "Resident memory of the component's process.", typ: "gauge"}
	cpu := &metric{name: "nicstack_component_cpu_percent", help: "CPU load since the previous status, percent of one CPU.", typ: "gauge"}
	ram := &metric{name: "nicstack_component_session_ram_bytes", help: "Session buffers charged to the component.", typ: "gauge"}
	own := &metric{name: "nicstack_component_counter", help: "A counter the component keeps itself.", typ: "gauge"}
	frames := &metric{name: "nicstack_session_frames_total", help: "Frames through a session at one side.", typ: "counter"}
	bytes := &metric{name: "nicstack_session_bytes_total", help: "Bytes through a session at one side.", typ: "counter"}
	drops := &metric{name: "nicstack_session_invalid_total", help: "Invalid descriptors dropped at one side.", typ: "counter"}
	sigSent := &metric{name: "nicstack_session_signals_sent_total", help: "Signals sent to the peer.", typ: "counter"}
	sigRecv := &metric{name: "nicstack_session_signals_received_total", help: "Signals received from the peer.", typ: "counter"}
	for _, cs := range st.Components {
		c := []string{"component", cs.Name}
		v := 0.0
		if cs.State == "running" {
			v = 1
		}
		up.add(v, "component", cs.Name, "cpus", cs.CPUs)
		restarts.add(float64(cs.Restarts), c...)
		rss.add(float64(cs.RSS), c...)
		cpu.add(cs.CPULoad, c...)
		ram.add(float64(cs.RAMUsed), c...)
		names := make([]string, 0, len(cs.Counters))
		for n := range cs.Counters {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			own.add(float64(cs.Counters[n]), "component", cs.Name, "name", n)
		}
		for _, ss := range cs.Sessions {
			for _, d := range []struct {
				dir string
				s   StreamStatus
			}{{"sent", ss.Sent}, {"received", ss.Received}} {
				l := []string{"component", cs.Name, "session", strconv.FormatUint(ss.ID, 10), "service", ss.Service,
					"label", ss.Label, "role", ss.Role, "direction", d.dir}
				frames.add(float64(d.s.Frames), l...)
				bytes.add(float64(d.s.Bytes), l...)
				drops.add(float64(d.s.Drops), l...)
				sigSent.add(float64(d.s.SignalsSent), l...)
				sigRecv.add(float64(d.s.SignalsReceived), l...)
			}
		}
	}
	for _, m := range []*metric{up, restarts, rss, cpu, ram, own, frames, bytes, drops, sigSent, sigRecv} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.typ)
		for _, s := range m.samples {
			fmt.Fprintln(w, s)
		}
	}
}
