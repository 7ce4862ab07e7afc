package iperf

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"sort"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func (p point) setting() string {
	if p.RxIrqThrottle == nil {
		return "scenario as written"
	}
	return fmt.Sprintf("rx_irq_throttle=%d tx_batch=%s", *p.RxIrqThrottle, yesNo(*p.TxBatch))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// writeTable prints the seed's table (setting, driver CPU, router CPU, throughput), then
// the other components' CPU and the NIC's and streams' event rates.
func writeTable(out io.Writer, points []point, sc *scenario) {
	fixed := []string{sc.roles[driverBinary], sc.roles[routerBinary], sc.roles[hardwareBinary]}
	var others []string
	seen := map[string]bool{}
	for _, p := range points {
		for name := range p.CPU {
			if !seen[name] && name != fixed[0] && name != fixed[1] && name != fixed[2] {
				seen[name] = true
				others = append(others, name)
			}
		}
	}
	sort.Strings(others)
	cpu := func(p point, name string) string {
		v, ok := p.CPU[name]
		if !ok || name == "" {
			return "-"
		}
		return fmt.Sprintf("%.0f %%", v)
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "setting\tdriver CPU\trouter CPU\tthroughput\thardware CPU\t")
	for _, n := range others {
		fmt.Fprintf(tw, "%s CPU\t", n)
	}
	fmt.Fprintln(tw, "irqs/s\tTX irqs\tdoorbells/kframe\tsignals/kframe\tretransmits\t")
	for _, p := range points {
		fmt.Fprintf(tw, "%s\t%s\t%s\t", p.setting(), cpu(p, fixed[0]), cpu(p, fixed[1]))
		if p.Error != "" {
			fmt.Fprintf(tw, "failed\t")
		} else {
			fmt.Fprintf(tw, "%.0f Mbit/s\t", p.Mbps)
		}
		fmt.Fprintf(tw, "%s\t", cpu(p, fixed[2]))
		for _, n := range others {
			fmt.Fprintf(tw, "%s\t", cpu(p, n))
		}
		fmt.Fprintf(tw, "%.0f\t%d\t%.1f\t%.1f\t%d\t\n", p.IrqsPerS, p.TxIrqs, p.DoorbellsPerK, p.SignalsPerK, p.Retransmits)
	}
	tw.Flush()
	for _, p := range points {
		if p.Error != "" {
			fmt.Fprintf(out, "%s: %s\n", p.setting(), p.Error)
		}
	}
}

// writeComparison prints a reference path's result and the ratio of every point to it.
func writeComparison(out io.Writer, points []point, ref reference, mbps float64) {
	fmt.Fprintf(out, "\n%s, same topology in namespaces: %.0f Mbit/s\n", ref, mbps)
	for _, p := range points {
		if p.Error == "" && mbps > 0 {
			fmt.Fprintf(out, "  %-34s %6.0f Mbit/s = %.2f x %s\n", p.setting(), p.Mbps, p.Mbps/mbps, ref)
		}
	}
}

// drawPlot draws throughput (top) and the driver's and router's CPU (bottom) against the
// throttle value, one line per tx_batch setting.
func drawPlot(path string, points []point) error {
	thr := plot.New()
	thr.Title.Text = "iperf throughput"
	thr.X.Label.Text = "rx_irq_throttle"
	thr.Y.Label.Text = "Mbit/s"
	cpu := plot.New()
	cpu.Title.Text = "CPU while traffic flowed"
	cpu.X.Label.Text = "rx_irq_throttle"
	cpu.Y.Label.Text = "% of one CPU"
	for _, p := range []*plot.Plot{thr, cpu} {
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
	}
	byBatch := map[string][]point{}
	var keys []string
	for _, p := range points {
		k := "scenario"
		if p.TxBatch != nil {
			k = "tx_batch=" + yesNo(*p.TxBatch)
		}
		if _, ok := byBatch[k]; !ok {
			keys = append(keys, k)
		}
		byBatch[k] = append(byBatch[k], p)
	}
	var names []string
	seen := map[string]bool{}
	for _, p := range points {
		for n := range p.CPU {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	for ki, k := range keys {
		dashed := ki > 0 // the second tx_batch setting (yes) dashed; colours stay per component
		pts := byBatch[k]
		x := func(p point) float64 {
			if p.RxIrqThrottle == nil {
				return 0
			}
			return float64(*p.RxIrqThrottle)
		}
		xy := make(plotter.XYs, len(pts))
		for i, p := range pts {
			xy[i] = plotter.XY{X: x(p), Y: p.Mbps}
		}
		if err := addLine(thr, k, xy, ki, false); err != nil {
			return err
		}
		for ni, n := range names {
			xy := make(plotter.XYs, len(pts))
			for i, p := range pts {
				xy[i] = plotter.XY{X: x(p), Y: p.CPU[n]}
			}
			if err := addLine(cpu, n+" "+k, xy, ni, dashed); err != nil {
				return err
			}
		}
	}
	img := vgimg.New(8*vg.Inch, 9*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadX: vg.Points(6), PadY: vg.Points(12)}
	canvases := plot.Align([][]*plot.Plot{{thr}, {cpu}}, tiles, dc)
	thr.Draw(canvases[0][0])
	cpu.Draw(canvases[1][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var plotColors = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
}

func addLine(p *plot.Plot, name string, xy plotter.XYs, color int, dashed bool) error {
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
	p.Legend.Add(name, l, s)
	return nil
}
