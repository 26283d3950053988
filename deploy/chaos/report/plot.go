package report

import (
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Sizes of the images and of what is drawn on them.
const (
	plotWidth   = 10 * vg.Inch
	panelHeight = 3.5 * vg.Inch
	labelSize   = 7  // points, of the fault labels
	labelRows   = 3  // fault labels stagger over this many rows
	labelChars  = 36 // longer fault labels are cut
	// headroom is the share of a labelled panel's height kept free
	// above the data for the fault labels and the legend.
	headroom = 0.4
)

// shade is the translucent fill of fault window i; it alternates so
// that adjacent windows stay apart.
func shade(i int) color.Color {
	if i%2 == 0 {
		return color.NRGBA{R: 255, G: 140, B: 0, A: 48}
	}
	return color.NRGBA{R: 128, G: 64, B: 192, A: 40}
}

// faultShading is a plot.Plotter that shades fault windows across the
// whole height of the data area and, when labels is set, writes each
// window's label near the top.
type faultShading struct {
	spans  []span
	labels bool
}

// Plot implements plot.Plotter.
func (s faultShading) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	sty := labelStyle(p)
	lineHeight := labelLineHeight(sty)
	for i, sp := range s.spans {
		x0, x1 := trX(sp.x0), trX(sp.x1)
		if x1 < x0 {
			x0, x1 = x1, x0
		}
		x0, x1 = max(x0, c.Min.X), min(x1, c.Max.X)
		if x1 < x0 {
			continue // outside the axis
		}
		// A window shorter than a point still shows.
		if x1-x0 < vg.Points(1) {
			x1 = min(x0+vg.Points(1), c.Max.X)
			x0 = x1 - vg.Points(1)
		}
		c.FillPolygon(shade(i), []vg.Point{
			{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y},
			{X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y},
		})
		if !s.labels {
			continue
		}
		// Labels start at their window, or end at it in the right
		// quarter of the plot so they stay inside.
		pt := vg.Point{X: x0 + vg.Points(2), Y: c.Max.Y - vg.Points(2) - vg.Length(i%labelRows)*lineHeight}
		sty.XAlign = draw.XLeft
		if x0 > c.Min.X+0.75*(c.Max.X-c.Min.X) {
			pt.X, sty.XAlign = x1-vg.Points(2), draw.XRight
		}
		c.FillText(sty, pt, truncate(sp.label, labelChars))
	}
}

// labelStyle is the style of p's fault labels.
func labelStyle(p *plot.Plot) draw.TextStyle {
	sty := p.X.Tick.Label
	sty.Font.Size = labelSize
	sty.Color = color.Gray{Y: 64}
	sty.YAlign = draw.YTop
	return sty
}

// labelLineHeight is the distance between two rows of fault labels.
func labelLineHeight(sty draw.TextStyle) vg.Length {
	return sty.Height("0") * 1.2
}

// DataRange implements plot.DataRanger: the windows widen the time axis
// to show them whole and leave the value axis alone.
func (s faultShading) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, sp := range s.spans {
		xmin, xmax = math.Min(xmin, math.Min(sp.x0, sp.x1)), math.Max(xmax, math.Max(sp.x0, sp.x1))
	}
	return xmin, xmax, math.Inf(1), math.Inf(-1)
}

// truncate shortens s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	return string(rs[:n-3]) + "..."
}

// line is one named line of a panel.
type line struct {
	name string
	xys  plotter.XYs
}

// timePanel is a plot over the run's time with r's fault windows
// shaded, labelled when labels is set, and lines drawn over them.
func timePanel(r *Run, title, yLabel string, labels bool, lines []line) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time since start (s)"
	p.Y.Label.Text = yLabel
	p.X.Min, p.X.Max = 0, math.Max(seconds(r.Started, r.Ended), 1)
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = 9
	p.Add(plotter.NewGrid())
	spans := faultSpans(r)
	p.Add(faultShading{spans: spans, labels: labels})
	for i, ln := range lines {
		if len(ln.xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(ln.xys)
		if err != nil {
			return nil, fmt.Errorf("cannot plot %s: %w", ln.name, err)
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / len(plotutil.SoftColors))
		l.Width = vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(ln.name, l)
	}
	if math.IsInf(p.Y.Max, 0) || p.Y.Max <= 0 {
		p.Y.Max = 1
	}
	if labels && len(spans) > 0 {
		// The labels take the top rows, the legend goes below them.
		p.Y.Max /= 1 - headroom
		p.Legend.YOffs = -vg.Length(labelRows) * labelLineHeight(labelStyle(p))
	}
	return p, nil
}

// plotThroughput draws ThroughputFile: requests per second above, the
// error rate below.
func plotThroughput(path string, r *Run) error {
	ok, failed := bucketRequests(r.Started, r.Ended.Sub(r.Started), r.Requests)
	rps, err := timePanel(r, "Requests per second (by completion)", "requests/s", true, []line{
		{"successful", rateXYs(ok)},
		{"failed", rateXYs(failed)},
	})
	if err != nil {
		return err
	}
	rate, err := timePanel(r, "Error rate", "failed requests (%)", false, []line{
		{"failed / all", errorRateXYs(ok, failed)},
	})
	if err != nil {
		return err
	}
	if rate.Y.Max < 100 {
		rate.Y.Max = math.Min(100, math.Max(rate.Y.Max*1.1, 1))
	}
	return savePanels(path, rps, rate)
}

// plotLag draws LagFile: each gateway's per-second p99 watch lag.
func plotLag(path string, r *Run) error {
	var lines []line
	for _, g := range lagP99(r.Started, r.Lags) {
		lines = append(lines, line{gatewayName(g.gateway), g.xys})
	}
	p, err := timePanel(r, "Watch delivery lag, p99 per second", "lag (ms)", true, lines)
	if err != nil {
		return err
	}
	return savePanels(path, p)
}

// savePanels stacks plots vertically, aligned on their axes, into a PNG
// at path.
func savePanels(path string, plots ...*plot.Plot) error {
	img := vgimg.New(plotWidth, panelHeight*vg.Length(len(plots)))
	dc := draw.New(img)
	rows := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{
		Rows: len(plots), Cols: 1,
		PadY:   vg.Points(16),
		PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(12),
	}
	canvases := plot.Align(rows, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", path, err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}
