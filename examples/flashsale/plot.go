package main

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The -plot picture's size in pixels, and its resolution.
const (
	plotWidth  = 1000
	plotHeight = 1250
	plotDPI    = 96
)

// The bands drawn behind every panel.
var (
	redisDownColor = color.NRGBA{R: 70, G: 90, B: 150, A: 60}
	degradedColor  = color.NRGBA{R: 235, G: 90, B: 60, A: 55}
)

// drawTimeline draws samples as a PNG into w: five panels over the
// same time axis (the record's available units per SKU, attempts per
// second by outcome, the queue's depth, units reclaimed, the breaker's
// state), with the spells Redis was down and the breaker was not primary
// shaded behind each.
func drawTimeline(w io.Writer, samples []sample, skus []string, title string) error {
	c, err := renderTimeline(samples, skus, title)
	if err != nil {
		return err
	}
	_, err = vgimg.PngCanvas{Canvas: c}.WriteTo(w)
	return err
}

// renderTimeline draws samples on a canvas of plotWidth by plotHeight
// pixels.
func renderTimeline(samples []sample, skus []string, title string) (*vgimg.Canvas, error) {
	if len(samples) < 2 {
		return nil, errors.New("fewer than two samples: the sale was too short to draw")
	}
	specs := []panelSpec{availablePanel(samples, skus), attemptsPanel(samples), queuePanel(samples),
		reclaimedPanel(samples), breakerPanel(samples)}
	panels := make([]*plot.Plot, len(specs))
	for i, spec := range specs {
		p, err := spec.plot(samples)
		if err != nil {
			return nil, err
		}
		panels[i] = p
	}
	panels[0].Title.Text = title
	panels[len(panels)-1].X.Label.Text = "seconds since the sale began (blue: Redis down; red: breaker not primary)"

	c := vgimg.NewWith(vgimg.UseWH(pixels(plotWidth), pixels(plotHeight)), vgimg.UseDPI(plotDPI))
	dc := draw.New(c)
	// A white background: PNG viewers show a transparent one as they like.
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(12), PadY: vg.Points(8)}
	rows := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		rows[i] = []*plot.Plot{p}
	}
	for i, cv := range plot.Align(rows, tiles, dc) {
		panels[i].Draw(cv[0])
	}
	return c, nil
}

// pixels is the length of n pixels at plotDPI.
func pixels(n int) vg.Length { return vg.Length(n) * vg.Inch / plotDPI }

// plotColor is the colour of a panel's i-th line.
func plotColor(i int) color.Color { return plotutil.DarkColors[i%len(plotutil.DarkColors)] }

// plainTicks are gonum's default ticks labelled without trailing zeros
// (750, not 750.00).
type plainTicks struct{}

// Ticks implements plot.Ticker.
func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

// series is one line of a panel.
type series struct {
	name string
	xys  plotter.XYs
}

// panelSpec is what one panel shows.
type panelSpec struct {
	ylabel string
	lines  []series
	// ymax fixes the y range to [ymin, ymax] when above ymin; otherwise it
	// is 0 to a little above the highest point.
	ymin, ymax float64
	ticks      []plot.Tick
	// legendLeft puts the legend top left (for lines that rise to the
	// right); default top right.
	legendLeft bool
}

// plot makes the panel: the grid, the bands (Redis down in grey, the
// breaker not primary in red) behind the lines, the lines, the legend.
func (s panelSpec) plot(samples []sample) (*plot.Plot, error) {
	p := plot.New()
	p.Y.Label.Text = s.ylabel
	p.X.Min, p.X.Max = 0, samples[len(samples)-1].at
	p.Y.Min, p.Y.Max = s.ymin, s.ymax
	if s.ymax <= s.ymin {
		p.Y.Min, p.Y.Max = 0, 1
		for _, l := range s.lines {
			for _, xy := range l.xys {
				p.Y.Max = max(p.Y.Max, xy.Y*1.1)
			}
		}
	}
	p.Y.Tick.Marker = plainTicks{}
	if s.ticks != nil {
		p.Y.Tick.Marker = plot.ConstantTicks(s.ticks)
	}
	p.Legend.Top, p.Legend.Left, p.Legend.TextStyle.Font.Size = true, s.legendLeft, vg.Points(9)
	p.Add(plotter.NewGrid())
	bands := []struct {
		on  func(sample) bool
		col color.Color
	}{
		{func(s sample) bool { return s.redisDown }, redisDownColor},
		{func(s sample) bool { return s.breaker != 0 }, degradedColor},
	}
	for _, b := range bands {
		for _, span := range spells(samples, b.on) {
			poly, err := plotter.NewPolygon(plotter.XYs{
				{X: span[0], Y: p.Y.Min}, {X: span[1], Y: p.Y.Min}, {X: span[1], Y: p.Y.Max}, {X: span[0], Y: p.Y.Max},
			})
			if err != nil {
				return nil, err
			}
			poly.Color, poly.LineStyle.Width = b.col, 0
			p.Add(poly)
		}
	}
	for i, l := range s.lines {
		if len(l.xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(l.xys)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.name, err)
		}
		line.Color = plotColor(i)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(l.name, line)
	}
	return p, nil
}

func availablePanel(samples []sample, skus []string) panelSpec {
	s := panelSpec{ylabel: "available units (database)"}
	for k, sku := range skus {
		var xys plotter.XYs
		for _, x := range samples {
			if x.available[k] >= 0 {
				xys = append(xys, plotter.XY{X: x.at, Y: float64(x.available[k])})
			}
		}
		s.lines = append(s.lines, series{sku, xys})
	}
	return s
}

// attemptsPanel plots each outcome's attempts per second, over windows of
// rateWindow samples.
func attemptsPanel(samples []sample) panelSpec {
	const rateWindow = 5
	s := panelSpec{ylabel: "attempts/s by outcome"}
	for k, name := range outcomes {
		xys := plotter.XYs{{X: samples[0].at, Y: 0}}
		for i := 1; i < len(samples); i++ {
			j := max(0, i-rateWindow)
			if dt := samples[i].at - samples[j].at; dt > 0 {
				xys = append(xys, plotter.XY{X: samples[i].at, Y: float64(samples[i].attempts[k]-samples[j].attempts[k]) / dt})
			}
		}
		s.lines = append(s.lines, series{name, xys})
	}
	return s
}

func queuePanel(samples []sample) panelSpec {
	xys := make(plotter.XYs, len(samples))
	for i, x := range samples {
		xys[i] = plotter.XY{X: x.at, Y: float64(x.queue)}
	}
	return panelSpec{ylabel: "queue depth (hand-offs)", lines: []series{{"in flight", xys}}}
}

func reclaimedPanel(samples []sample) panelSpec {
	s := panelSpec{ylabel: "units reclaimed (unpaid)", legendLeft: true}
	for k, name := range []string{"by the gate (Redis)", "by the record's own passes"} {
		xys := make(plotter.XYs, len(samples))
		for i, x := range samples {
			xys[i] = plotter.XY{X: x.at, Y: float64(x.reclaimed[k])}
		}
		s.lines = append(s.lines, series{name, xys})
	}
	return s
}

// breakerPanel draws the breaker's state as steps.
func breakerPanel(samples []sample) panelSpec {
	var xys plotter.XYs
	for i, x := range samples {
		if i > 0 && samples[i-1].breaker != x.breaker {
			xys = append(xys, plotter.XY{X: x.at, Y: float64(samples[i-1].breaker)})
		}
		xys = append(xys, plotter.XY{X: x.at, Y: float64(x.breaker)})
	}
	return panelSpec{ylabel: "breaker", lines: []series{{"state", xys}}, ymin: -0.3, ymax: 3.3,
		ticks: []plot.Tick{{Value: 0, Label: "primary"}, {Value: 1, Label: "degraded"},
			{Value: 2, Label: "recalibrating"}, {Value: 3, Label: "ramping"}}}
}

// spells returns the [from, to] times of each run of samples for which on
// holds: from the first such sample to the sample after the last.
func spells(samples []sample, on func(sample) bool) [][2]float64 {
	var out [][2]float64
	start := -1
	for i, s := range samples {
		switch {
		case on(s) && start < 0:
			start = i
		case !on(s) && start >= 0:
			out = append(out, [2]float64{samples[start].at, s.at})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, [2]float64{samples[start].at, samples[len(samples)-1].at})
	}
	return out
}

// plotTitle names the sale in the picture.
func plotTitle(r *report, cfg config) string {
	t := fmt.Sprintf("flash sale on %s: %d units, %d attempts, %d sold, oversold %d, drift %d", r.Backend, r.OnSale, r.Attempts, r.Sold, r.Oversold, r.Drift)
	if cfg.chaos {
		t += " (-chaos)"
	}
	return t
}
