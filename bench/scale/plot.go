package scale

import (
	"errors"
	"image/color"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/nicstack/nicstack/bench"
)

// drawPlot draws each figure against the number of guests, one panel each (a log axis of
// guests), with the target as a dotted level where it has one.
func drawPlot(path string, points []Point) error {
	var ok []Point
	for _, p := range points {
		if p.Runs > 0 {
			ok = append(ok, p)
		}
	}
	if len(ok) == 0 {
		return errors.New("--plot: no number of guests measured")
	}
	ticks := make(plot.ConstantTicks, len(ok))
	for i, p := range ok {
		ticks[i] = plot.Tick{Value: float64(p.Guests), Label: strconv.Itoa(p.Guests)}
	}
	type series struct {
		name string
		y    func(Point) float64
	}
	panels := []struct {
		title, ylabel string
		lines         []series
		target        float64 // 0: none
	}{
		{"aggregate throughput", "Mbit/s", []series{{"sum", func(p Point) float64 { return p.Mbps }},
			{"slowest guest x N", func(p Point) float64 { return p.GuestMbpsMin * float64(p.Guests) }}}, 0},
		{"Jain's fairness index", "index", []series{{"Jain", func(p Point) float64 { return p.Jain }}}, targetJain},
		{"memory per guest (PSS)", "MiB", []series{{"mean", func(p Point) float64 { return p.GuestPSSMiB }},
			{"largest", func(p Point) float64 { return p.GuestPSSMaxMiB }},
			{"mean when idle", func(p Point) float64 { return p.IdleGuestPSSMiB }}}, targetGuestPSS},
		{"time until every guest holds a lease", "s", []series{{"leases", func(p Point) float64 { return p.LeaseSeconds }}}, targetLeaseTime},
		{"CPU of the idle scenario", "% of one CPU", []series{{"all components", func(p Point) float64 { return p.IdleCPU }},
			{"the guests", func(p Point) float64 { return p.IdleGuestsCPU }}}, targetIdleCPU},
		{"router CPU per Gbit/s", "% of one CPU per Gbit/s", []series{{"nic_router", func(p Point) float64 { return p.RouterCPUPerGbps }}}, 0},
	}
	colors := []color.Color{color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff}}
	var plots [][]*plot.Plot
	var row []*plot.Plot
	for _, pn := range panels {
		pl := plot.New()
		pl.Title.Text = pn.title
		pl.X.Label.Text = "guests"
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = ticks
		pl.X.Min, pl.X.Max = float64(ok[0].Guests)/1.25, float64(ok[len(ok)-1].Guests)*1.25 // room either side, a range for one point
		pl.Y.Label.Text = pn.ylabel
		pl.Y.Min = 0
		pl.Add(plotter.NewGrid())
		pl.Legend.Top = true
		for i, s := range pn.lines {
			xy := make(plotter.XYs, len(ok))
			for j, p := range ok {
				xy[j] = plotter.XY{X: float64(p.Guests), Y: s.y(p)}
			}
			l, pts, err := plotter.NewLinePoints(xy)
			if err != nil {
				return err
			}
			l.Color, pts.Color = colors[i%len(colors)], colors[i%len(colors)]
			pl.Add(l, pts)
			pl.Legend.Add(s.name, l, pts)
		}
		if pn.target > 0 {
			l, err := plotter.NewLine(plotter.XYs{{X: float64(ok[0].Guests), Y: pn.target}, {X: float64(ok[len(ok)-1].Guests), Y: pn.target}})
			if err != nil {
				return err
			}
			l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
			l.Color = color.RGBA{0xd6, 0x27, 0x28, 0xff}
			pl.Add(l)
			pl.Legend.Add("target (issue 33)", l)
		}
		row = append(row, pl)
		if len(row) == 2 {
			plots, row = append(plots, row), nil
		}
	}
	img := vgimg.New(12*vg.Inch, vg.Length(len(plots))*4*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 2, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadX: vg.Points(18), PadY: vg.Points(18), PadLeft: vg.Points(6), PadRight: vg.Points(6)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j := range plots[i] {
			plots[i][j].Draw(canvases[i][j])
		}
	}
	return bench.WritePNG(img, path)
}
