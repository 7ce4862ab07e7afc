package supervisor

import (
	"net/http"
	"strconv"

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
	rssDesc      = prometheus.NewDesc("nicstack_component_rss_bytes", "Resident memory of the component's process.", componentLabels, nil)
	cpuDesc      = prometheus.NewDesc("nicstack_component_cpu_percent", "CPU load since the previous status, percent of one CPU.", componentLabels, nil)
	ramDesc      = prometheus.NewDesc("nicstack_component_session_ram_bytes", "Session buffers charged to the component.", componentLabels, nil)
	ownDesc      = prometheus.NewDesc("nicstack_component_counter", "A counter the component keeps itself.", []string{"component", "name"}, nil)
	framesDesc   = prometheus.NewDesc("nicstack_session_frames_total", "Frames through a session at one side.", sessionLabels, nil)
	bytesDesc    = prometheus.NewDesc("nicstack_session_bytes_total", "Bytes through a session at one side.", sessionLabels, nil)
	dropsDesc    = prometheus.NewDesc("nicstack_session_invalid_total", "Invalid descriptors dropped at one side.", sessionLabels, nil)
	sigSentDesc  = prometheus.NewDesc("nicstack_session_signals_sent_total", "Signals sent to the peer.", sessionLabels, nil)
	sigRecvDesc  = prometheus.NewDesc("nicstack_session_signals_received_total", "Signals received from the peer.", sessionLabels, nil)
)

// statusCollector turns a status (which asks every component for its counters) into metrics.
type statusCollector struct{ s *Supervisor }

func (statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{upDesc, restartsDesc, rssDesc, cpuDesc, ramDesc, ownDesc, framesDesc, bytesDesc, dropsDesc, sigSentDesc, sigRecvDesc} {
		ch <- d
	}
}

func (c statusCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok := c.s.Status()
	if !ok {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, cs := range st.Components {
		up := 0.0
		if cs.State == Running.String() {
			up = 1
		}
		gauge(upDesc, up, cs.Name, cs.CPUs)
		counter(restartsDesc, uint64(cs.Restarts), cs.Name)
		gauge(rssDesc, float64(cs.RSS), cs.Name)
		gauge(cpuDesc, cs.CPULoad, cs.Name)
		gauge(ramDesc, float64(cs.RAMUsed), cs.Name)
		for n, v := range cs.Counters {
			gauge(ownDesc, float64(v), cs.Name, n)
		}
		for _, ss := range cs.Sessions {
			for _, d := range []struct {
				dir string
				s   StreamStatus
			}{{"sent", ss.Sent}, {"received", ss.Received}} {
				l := []string{cs.Name, strconv.FormatUint(ss.ID, 10), ss.Service, ss.Label, ss.Role, d.dir}
				counter(framesDesc, d.s.Frames, l...)
				counter(bytesDesc, d.s.Bytes, l...)
				counter(dropsDesc, d.s.Drops, l...)
				counter(sigSentDesc, d.s.SignalsSent, l...)
				counter(sigRecvDesc, d.s.SignalsReceived, l...)
			}
		}
	}
}
