package supervisor

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/nicstack/nicstack/runtime/config"
)

// Report renders a status as Genode's init state report: <state> with one <child> per
// component, its RAM, and the sessions it requested and provides, as the scenario's
// <report> asks (everything when the scenario has no <report>).
func Report(st Status, want *config.Node) *config.Node {
	on := func(attr string) bool {
		if want == nil {
			return true
		}
		v, _ := want.Bool(attr, false)
		return v
	}
	attr := func(name, value string) config.Attr { return config.Attr{Name: name, Value: value} }
	itoa := func(v uint64) string { return strconv.FormatUint(v, 10) }
	state := &config.Node{Type: "state"}
	for _, cs := range st.Components {
		ch := &config.Node{Type: "child", Attrs: []config.Attr{
			attr("name", cs.Name), attr("binary", cs.Binary), attr("state", cs.State),
			attr("restarts", strconv.Itoa(cs.Restarts)),
			attr("cpus", cs.CPUs), attr("cpu_load", strconv.FormatFloat(cs.CPULoad, 'f', 1, 64)),
		}}
		// As Genode's init reports them: the exit value of an exited child, and the heartbeats
		// a child skips, once it skips any.
		if cs.State == Exited.String() {
			ch.Attrs = append(ch.Attrs, attr("exited", strconv.Itoa(cs.ExitCode)))
		}
		if cs.SkippedHeartbeats > 0 {
			ch.Attrs = append(ch.Attrs, attr("skipped_heartbeats", itoa(cs.SkippedHeartbeats)))
		}
		if cs.Version != "" {
			ch.Attrs = append(ch.Attrs, attr("version", cs.Version))
		}
		if cs.Pid != 0 {
			ch.Attrs = append(ch.Attrs, attr("pid", strconv.Itoa(cs.Pid)))
		}
		if on("child_ram") {
			ch.Nodes = append(ch.Nodes, &config.Node{Type: "ram", Attrs: []config.Attr{
				attr("quota", itoa(cs.RAM)), attr("used", itoa(cs.RAMUsed)), attr("rss", itoa(cs.RSS))}})
		}
		if on("requested") && len(cs.Requests) > 0 {
			req := &config.Node{Type: "requested"}
			for _, r := range cs.Requests {
				req.Nodes = append(req.Nodes, &config.Node{Type: "session", Attrs: []config.Attr{
					attr("service", r.Service), attr("label", r.Label), attr("state", r.State), attr("server", r.Server)}})
			}
			ch.Nodes = append(ch.Nodes, req)
		}
		if on("provided") {
			prov := &config.Node{Type: "provided"}
			for _, s := range cs.Sessions {
				if s.Role == "server" {
					prov.Nodes = append(prov.Nodes, &config.Node{Type: "session", Attrs: []config.Attr{
						attr("id", itoa(s.ID)), attr("service", s.Service), attr("label", s.Label),
						attr("frames_in", itoa(s.Received.Frames)), attr("frames_out", itoa(s.Sent.Frames))}})
				}
			}
			if len(prov.Nodes) > 0 {
				ch.Nodes = append(ch.Nodes, prov)
			}
		}
		state.Nodes = append(state.Nodes, ch)
	}
	return state
}

// WriteReports writes the state report to path every interval until ctx ends, replacing the
// file atomically so readers never see half a report.
func (s *Supervisor) WriteReports(ctx context.Context, path string, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, ok := s.Status()
		if !ok {
			return
		}
		var want *config.Node
		s.call(func() { want = s.sc.Report })
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, Report(st, want).XML(), 0o644); err != nil {
			s.log.Error("state report: " + err.Error())
			return
		}
		os.Rename(tmp, path)
	}
}
