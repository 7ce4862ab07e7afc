package iperf

import (
	"fmt"
	"image/color"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/nicstack/nicstack/bench"
)

// drawPlot draws throughput (top), with --latency the 1-byte round trips' p99 (idle solid,
// under load dashed) and, per direction, every component's CPU against the
// throttle setting: one category per rx_irq_throttle value as given (adaptive among them),
// labelled with its interval and the interrupt rate it allows; a line per direction and
// tx_batch setting, --flows and --rate value (CPU: per component, tx_batch=yes dashed). The --compare references (refs,
// and a guest scenario's reference points among all) are dotted level lines across the
// categories: their throughput, and the CPU of each of their processes in their direction's
// panel. Each panel's legend stands to its right, outside the data.
func drawPlot(path string, all, refs []point) error {
	var points []point
	for _, p := range all {
		if p.Reference == "" {
			points = append(points, p)
		} else {
			refs = append(refs, p)
		}
	}
	var cats []string
	index := map[string]int{}
	for _, p := range points {
		c := "as written"
		if p.RxIrqThrottle != nil {
			c = string(*p.RxIrqThrottle)
		}
		if _, ok := index[c]; !ok {
			index[c] = len(cats)
			cats = append(cats, c)
		}
	}
	x := func(p point) float64 {
		if p.RxIrqThrottle == nil {
			return 0
		}
		return float64(index[string(*p.RxIrqThrottle)])
	}
	ticks := make(plot.ConstantTicks, len(cats))
	for i, c := range cats {
		ticks[i] = plot.Tick{Value: float64(i), Label: throttleLabel(c)}
	}
	panel := func(title, ylabel string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "rx_irq_throttle (ITR in 256 ns steps; the interrupt rate it allows at most)"
		p.X.Tick.Marker = ticks
		p.X.Min, p.X.Max = -0.5, float64(len(cats))-0.5
		p.Y.Label.Text = ylabel
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		return p
	}
	type line struct {
		key string
		pts []point
	}
	var lines []line // per direction and tx_batch, in the points' order
	lineOf := map[string]int{}
	for _, p := range points {
		k := p.Direction
		if p.Flows > 0 {
			k += fmt.Sprintf(" flows=%d", p.Flows)
		}
		if p.IP == ipv6 {
			k += " IPv6"
		}
		if p.Rate != "" {
			k += " -b " + p.Rate
		}
		if p.TxBatch != nil {
			k += " tx_batch=" + yesNo(*p.TxBatch)
		}
		i, ok := lineOf[k]
		if !ok {
			i = len(lines)
			lineOf[k] = i
			lines = append(lines, line{key: k})
		}
		if p.Runs > 0 {
			lines[i].pts = append(lines[i].pts, p)
		}
	}
	thr := panel("iperf throughput (medians)", "Mbit/s")
	thrLegend := plot.NewLegend()
	var rtt *plot.Plot // with --latency
	rttLegend := plot.NewLegend()
	var dirs []string
	cpu := map[string]*plot.Plot{}
	cpuLegend := map[string]*plot.Legend{}
	comps := 0 // the most components a CPU panel has lines of
	for li, l := range lines {
		xy := make(plotter.XYs, len(l.pts))
		for i, p := range l.pts {
			xy[i] = plotter.XY{X: x(p), Y: p.Mbps}
		}
		if err := addLine(thr, &thrLegend, l.key, xy, li, false); err != nil {
			return err
		}
		if len(l.pts) == 0 {
			continue
		}
		if len(l.pts[0].RR) > 0 {
			if rtt == nil {
				rtt = panel("round trips of 1 B transactions, p99 (medians)", "µs (log scale)")
				rtt.Y.Min = math.Inf(1) // the data's, not 0, on a log axis
				rtt.Y.Scale, rtt.Y.Tick.Marker = plot.LogScale{}, ticks125{}
			}
			for pi, phase := range rrPhases {
				var xy plotter.XYs
				for _, p := range l.pts {
					for _, f := range p.RR {
						if f.Phase == phase && f.Bytes == rrSizes[0] && f.P99us > 0 {
							xy = append(xy, plotter.XY{X: x(p), Y: f.P99us})
						}
					}
				}
				if len(xy) > 0 {
					if err := addLine(rtt, &rttLegend, l.key+" "+phase, xy, li, pi == 1); err != nil {
						return err
					}
				}
			}
		}
		dir := l.pts[0].Direction
		if cpu[dir] == nil {
			dirs = append(dirs, dir)
			cpu[dir] = panel(directionTitle[dir]+": CPU while traffic flowed", "% of one CPU")
			lg := plot.NewLegend()
			cpuLegend[dir] = &lg
		}
		var names []string
		for n := range l.pts[0].CPU {
			names = append(names, n)
		}
		sort.Strings(names)
		comps = max(comps, len(names))
		batched := l.pts[0].TxBatch != nil && *l.pts[0].TxBatch
		for ni, n := range names {
			xy := make(plotter.XYs, len(l.pts))
			for i, p := range l.pts {
				xy[i] = plotter.XY{X: x(p), Y: p.CPU[n]}
			}
			name := n
			if f := l.pts[0].Flows; f > 0 {
				name += fmt.Sprintf(" flows=%d", f)
			}
			if r := l.pts[0].Rate; r != "" {
				name += " -b " + r
			}
			if l.pts[0].TxBatch != nil {
				name += " tx_batch=" + yesNo(batched)
			}
			if err := addLine(cpu[dir], cpuLegend[dir], name, xy, ni, batched); err != nil {
				return err
			}
		}
	}
	level := func(v float64) plotter.XYs {
		return plotter.XYs{{X: -0.4, Y: v}, {X: float64(len(cats)) - 0.6, Y: v}}
	}
	levels := comps // the CPU levels drawn, each in a colour after the components'
	for ri, r := range refs {
		name := r.Reference + " " + r.Direction
		if err := addLevel(thr, &thrLegend, name, level(r.Mbps), len(lines)+ri); err != nil {
			return err
		}
		if cpu[r.Direction] == nil {
			continue
		}
		for _, n := range slices.Sorted(maps.Keys(r.CPU)) {
			if err := addLevel(cpu[r.Direction], cpuLegend[r.Direction], r.Reference+": "+n, level(r.CPU[n]), levels); err != nil {
				return err
			}
			levels++
		}
	}
	plots := [][]*plot.Plot{{thr}}
	legends := []*plot.Legend{&thrLegend}
	if rtt != nil {
		plots = append(plots, []*plot.Plot{rtt})
		legends = append(legends, &rttLegend)
	}
	for _, d := range dirs {
		plots = append(plots, []*plot.Plot{cpu[d]})
		legends = append(legends, cpuLegend[d])
	}
	const legendWidth = 3 * vg.Inch
	img := vgimg.New(8*vg.Inch+legendWidth, vg.Length(len(plots))*4*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadX: vg.Points(6), PadY: vg.Points(12)}
	left := draw.Crop(dc, 0, -legendWidth, 0, 0)
	right := draw.Crop(dc, dc.Max.X-legendWidth+vg.Points(12), 0, 0, 0)
	canvases := plot.Align(plots, tiles, left)
	for i, row := range plots {
		row[0].Draw(canvases[i][0])
		legends[i].Top, legends[i].Left = true, true
		legends[i].Draw(draw.Crop(tiles.At(right, 0, i), 0, 0, 0, -vg.Points(24)))
	}
	return bench.WritePNG(img, path)
}

// throttleLabel is a category's tick label: the value as given, its interval and the
// interrupt rate ITR allows at most.
func throttleLabel(c string) string {
	itr, err := strconv.ParseUint(c, 10, 16)
	switch {
	case err != nil:
		return c
	case itr == 0:
		return "0\noff"
	}
	interval := time.Duration(itr) * 256 * time.Nanosecond
	every := fmt.Sprintf("%.1fµs", float64(interval)/float64(time.Microsecond))
	if interval >= time.Millisecond {
		every = fmt.Sprintf("%.2fms", float64(interval)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%d\n%s\n≤%.0f/s", itr, every, float64(time.Second)/float64(interval))
}

var plotColors = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
}

func addLine(p *plot.Plot, lg *plot.Legend, name string, xy plotter.XYs, color int, dashed bool) error {
	l, s, err := plotter.NewLinePoints(xy)
	if err != nil {
		return err
	}
	c := plotColors[color%len(plotColors)]
	l.Color, s.Color = c, c
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	}
	p.Add(l, s)
	lg.Add(name, l, s)
	return nil
}

// addLevel adds a reference's level: a dotted line without marks.
func addLevel(p *plot.Plot, lg *plot.Legend, name string, xy plotter.XYs, color int) error {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.Color = plotColors[color%len(plotColors)]
	l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
	l.Width = vg.Points(1.5)
	p.Add(l)
	lg.Add(name, l)
	return nil
}

// ticks125 labels a log axis at 1, 2 and 5 of every decade: a latency panel spans one or two.
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for dec := math.Pow(10, math.Floor(math.Log10(lo))); dec <= hi; dec *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := m * dec; v >= lo && v <= hi {
				ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
			}
		}
	}
	return ts
}
