package vhost

import (
	"errors"
	"fmt"
	"image/color"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/nicstack/nicstack/bench"
)

// drawPlot draws the delivered rate and the middle's CPU per delivered Mpps against the
// frame size, a line per setup and queue count.
func drawPlot(path string, points []Point) error {
	var ok []Point
	for _, p := range points {
		if p.NotRun == "" && p.Runs > 0 {
			ok = append(ok, p)
		}
	}
	if len(ok) == 0 {
		return errors.New("--plot: no point measured")
	}
	panels := []struct {
		title, ylabel string
		y             func(Sample) float64
	}{
		{"delivered at the sink", "Mpps", func(s Sample) float64 { return s.Mpps }},
		{"middle CPU per delivered Mpps", "% of one CPU per Mpps", func(s Sample) float64 { return s.MiddlePerMpps }},
	}
	colors := []color.Color{color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff},
		color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}}
	var row []*plot.Plot
	for _, pn := range panels {
		pl := plot.New()
		pl.Title.Text = pn.title
		pl.X.Label.Text = "frame bytes"
		pl.X.Scale = plot.LogScale{}
		var ticks plot.ConstantTicks
		lo, hi := ok[0].FrameBytes, ok[0].FrameBytes
		for _, p := range ok {
			ticks = append(ticks, plot.Tick{Value: float64(p.FrameBytes), Label: strconv.Itoa(p.FrameBytes)})
			lo, hi = min(lo, p.FrameBytes), max(hi, p.FrameBytes)
		}
		pl.X.Tick.Marker = ticks
		pl.X.Min, pl.X.Max = float64(lo)/1.25, float64(hi)*1.25
		pl.Y.Label.Text = pn.ylabel
		pl.Y.Min = 0
		pl.Add(plotter.NewGrid())
		pl.Legend.Top = true
		i := 0
		for _, q := range queueCounts(ok) {
			for _, setup := range []string{Ours, DPDK} {
				var xy plotter.XYs
				for _, p := range ok {
					if p.Queues != q {
						continue
					}
					s := p.Ours
					if setup == DPDK {
						s = p.DPDK
					}
					xy = append(xy, plotter.XY{X: float64(p.FrameBytes), Y: pn.y(s)})
				}
				l, pts, err := plotter.NewLinePoints(xy)
				if err != nil {
					return err
				}
				l.Color, pts.Color = colors[i%len(colors)], colors[i%len(colors)]
				pl.Add(l, pts)
				pl.Legend.Add(fmt.Sprintf("%s, %d queue(s)", setup, q), l, pts)
				i++
			}
		}
		row = append(row, pl)
	}
	img := vgimg.New(12*vg.Inch, 4*vg.Inch)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadX: vg.Points(18), PadLeft: vg.Points(6), PadRight: vg.Points(6)}
	canvases := plot.Align([][]*plot.Plot{row}, tiles, draw.New(img))
	for j := range row {
		row[j].Draw(canvases[0][j])
	}
	return bench.WritePNG(img, path)
}

// queueCounts lists the queue counts of the points, in their order.
func queueCounts(points []Point) []int {
	var qs []int
	seen := map[int]bool{}
	for _, p := range points {
		if !seen[p.Queues] {
			seen[p.Queues] = true
			qs = append(qs, p.Queues)
		}
	}
	return qs
}
