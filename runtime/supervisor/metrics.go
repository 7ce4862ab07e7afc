package supervisor

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsHandler serves the components' state and counters to Prometheus, read fresh at each
// scrape from a private registry (the process-wide default one would mix in whatever else
// registers there).
func (s *Supervisor) MetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(statusCollector{s})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

var (
	componentLabels = []string{"component"}
	sessionLabels   = []string{"component", "session", "service", "label", "role", "direction"}

	upDesc       = prometheus.NewDesc("nicstack_component_up", "1 while the component runs.", []string{"component", "cpus"}, nil)
	restartsDesc = prometheus.NewDesc("nicstack_component_restarts_total", "Restarts of the component.", componentLabels, nil)
	rssDesc      = prometheus.NewDesc("nicstack_component_resident_memory_bytes", "Resident memory of the component's process.", componentLabels, nil)
	cpuDesc      = prometheus.NewDesc("nicstack_component_cpu_seconds_total", "User and system CPU time of the component's process.", componentLabels, nil)
	ramDesc      = prometheus.NewDesc("nicstack_component_session_ram_bytes", "Session buffers charged to the component.", componentLabels, nil)
	quotaDesc    = prometheus.NewDesc("nicstack_component_session_ram_quota_bytes", "The component's ram quota for session buffers (0: no limit).", componentLabels, nil)
	framesDesc   = prometheus.NewDesc("nicstack_session_frames_total", "Frames through a session at one side.", sessionLabels, nil)
	bytesDesc    = prometheus.NewDesc("nicstack_session_bytes_total", "Bytes through a session at one side.", sessionLabels, nil)
	dropsDesc    = prometheus.NewDesc("nicstack_session_invalid_descriptors_total", "Invalid descriptors dropped at one side.", sessionLabels, nil)
	sigSentDesc  = prometheus.NewDesc("nicstack_session_signals_sent_total", "Signals sent to the peer.", sessionLabels, nil)
	sigRecvDesc  = prometheus.NewDesc("nicstack_session_signals_received_total", "Signals received from the peer.", sessionLabels, nil)

	queueLabels      = []string{"component", "hop"}
	queueFramesDesc  = prometheus.NewDesc("nicstack_queue_frames", "Frames waiting at a hop of the component's data path.", queueLabels, nil)
	queueBytesDesc   = prometheus.NewDesc("nicstack_queue_bytes", "Bytes of the frames waiting at a hop.", queueLabels, nil)
	queueSojournDesc = prometheus.NewDesc("nicstack_queue_sojourn_seconds", "Age of the oldest frame waiting at a hop (0 when none waits).", queueLabels, nil)
)

// A family is the Prometheus metric family a component's own counter is exported as.
type family struct {
	name  string
	gauge bool
	scale float64 // multiplies the counter's value into the family's base unit
}

// familyOf names the family of a component counter by Prometheus' conventions: the base unit
// in the name (bytes, frames, seconds, interrupts), "_total" on counters. A counter's name
// says its unit by its suffix (rx_bytes, cpu_us, iperf_ms, iperf_bits_per_second, first_reply_unix_ns), or prefix
// (irq_rxt0, frames_sent);
// unitFrames names the frame counters whose names do not, gauges the values that go down.
func familyOf(counter string) family {
	name := "nicstack_" + counter
	switch {
	case gauges[counter]:
		return family{name: name, gauge: true, scale: 1}
	case strings.HasSuffix(counter, "_bits_per_second"):
		return family{name: strings.TrimSuffix(name, "_bits_per_second") + "_bytes_per_second", gauge: true, scale: 1.0 / 8}
	case strings.HasSuffix(counter, "_unix_ns"):
		return family{name: strings.TrimSuffix(name, "_unix_ns") + "_timestamp_seconds", gauge: true, scale: 1e-9}
	case strings.HasSuffix(counter, "_us"):
		return family{name: strings.TrimSuffix(name, "_us") + "_seconds_total", scale: 1e-6}
	case strings.HasSuffix(counter, "_ms"):
		return family{name: strings.TrimSuffix(name, "_ms") + "_seconds_total", scale: 1e-3}
	case strings.HasPrefix(counter, "irq_") || counter == "interrupts" || strings.HasSuffix(counter, "_interrupts"):
		return family{name: strings.TrimSuffix(name, "_interrupts") + "_interrupts_total", scale: 1}
	case strings.HasPrefix(counter, "frames_"):
		return family{name: "nicstack_" + strings.TrimPrefix(counter, "frames_") + "_frames_total", scale: 1}
	case unitFrames[counter]:
		return family{name: name + "_frames_total", scale: 1}
	}
	return family{name: name + "_total", scale: 1}
}

// gauges are the component counters that are levels, not running totals.
var gauges = map[string]bool{
	"interfaces": true, "dhcp_leases": true, "peer_link": true, "tag": true, "tx_bql_limit_bytes": true,
}

// unitFrames are the counters of frames whose names do not end in "frames".
var unitFrames = map[string]bool{
	"dropped": true, "dropped_full": true, "held_overflow": true, "rx_dropped": true, "tx_dropped": true,
	"link_rx_dropped": true, "link_tx_dropped": true, "wire_tx_dropped": true, "wire_rx_lost": true,
	"wire_rx_invalid": true, "wire_reflected": true, "rx_refused": true, "rx_no_descriptor": true, "rx_other": true,
	"tx_offload_dropped": true, "tx_full": true, "tx_ring_full": true, "echo_drops": true,
	"codel_dropped": true, "codel_marked": true, "overlimit": true, "xoff_rx": true, "xon_rx": true,
}

// statusCollector turns a status (which asks every component for its counters) into metrics.
type statusCollector struct{ s *Supervisor }

// Describe sends nothing: the families of components' own counters are known only at a
// scrape, so the collector is unchecked.
func (statusCollector) Describe(chan<- *prometheus.Desc) {}

func (c statusCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok := c.s.Status()
	if !ok {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	families := map[string]*prometheus.Desc{}
	for _, cs := range st.Components {
		up := 0.0
		if cs.State == Running.String() {
			up = 1
		}
		gauge(upDesc, up, cs.Name, cs.CPUs)
		counter(restartsDesc, float64(cs.Restarts), cs.Name)
		gauge(rssDesc, float64(cs.RSS), cs.Name)
		counter(cpuDesc, cs.CPUSeconds, cs.Name)
		gauge(ramDesc, float64(cs.RAMUsed), cs.Name)
		gauge(quotaDesc, float64(cs.RAM), cs.Name)
		for n, v := range cs.Counters {
			f := familyOf(n)
			d := families[f.name]
			if d == nil {
				d = prometheus.NewDesc(f.name, "The component counter "+n+".", componentLabels, nil)
				families[f.name] = d
			}
			if f.gauge {
				gauge(d, float64(v)*f.scale, cs.Name)
			} else {
				counter(d, float64(v)*f.scale, cs.Name)
			}
		}
		for _, ss := range cs.Sessions {
			for _, d := range []struct {
				dir string
				s   StreamStatus
			}{{"sent", ss.Sent}, {"received", ss.Received}} {
				l := []string{cs.Name, strconv.FormatUint(ss.ID, 10), ss.Service, ss.Label, ss.Role, d.dir}
				counter(framesDesc, float64(d.s.Frames), l...)
				counter(bytesDesc, float64(d.s.Bytes), l...)
				counter(dropsDesc, float64(d.s.Drops), l...)
				counter(sigSentDesc, float64(d.s.SignalsSent), l...)
				counter(sigRecvDesc, float64(d.s.SignalsReceived), l...)
			}
		}
		for _, q := range cs.Queues {
			gauge(queueFramesDesc, float64(q.Frames), cs.Name, q.Hop)
			gauge(queueBytesDesc, float64(q.Bytes), cs.Name, q.Hop)
			gauge(queueSojournDesc, q.Sojourn.Seconds(), cs.Name, q.Hop)
		}
	}
}
