package report

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot is one PNG the report links.
type Plot struct {
	Title string
	File  string // name inside the results directory
}

// series is one line of a plot.
type series struct {
	name string
	xys  plotter.XYs
}

// Plots draws, per scenario kind, the latency CDFs of every scenario and
// target (all runs together) and their throughput over time (median run)
// into dir.
func Plots(dir string, r *Results) ([]Plot, error) {
	var kinds []string
	byKind := map[string][]Scenario{}
	for _, s := range r.Scenarios {
		if _, ok := byKind[s.Kind]; !ok {
			kinds = append(kinds, s.Kind)
		}
		byKind[s.Kind] = append(byKind[s.Kind], s)
	}
	// Lines name their target when some scenario ran on several.
	several := false
	for _, s := range r.Scenarios {
		several = several || len(s.Results) > 1
	}
	var out []Plot
	for _, kind := range kinds {
		var cdfs, tps []series
		for _, s := range byKind[kind] {
			for _, tr := range s.Results {
				name := s.Name
				if several {
					name += " · " + tr.Target
				}
				if len(tr.CDF) > 0 {
					xys := make(plotter.XYs, 0, len(tr.CDF))
					for _, p := range tr.CDF {
						xys = append(xys, plotter.XY{X: max(p.Ms, 1e-3), Y: p.Q})
					}
					cdfs = append(cdfs, series{name, xys})
				}
				if i := tr.MedianRun(); i >= 0 && len(tr.Runs[i].Throughput) > 0 {
					run := tr.Runs[i]
					xys := make(plotter.XYs, len(run.Throughput))
					for j, v := range run.Throughput {
						xys[j] = plotter.XY{X: (float64(j) + 0.5) * run.IntervalS, Y: v}
					}
					tps = append(tps, series{name, xys})
				}
			}
		}
		if len(cdfs) > 0 {
			file := "cdf-" + kind + ".png"
			title := kind + ": latency CDF (all runs)"
			if err := draw(filepath.Join(dir, file), title, "latency (ms, log scale)", "fraction of operations ≤ latency", true, cdfs); err != nil {
				return out, err
			}
			out = append(out, Plot{Title: title, File: file})
		}
		if len(tps) > 0 {
			file := "throughput-" + kind + ".png"
			title := kind + ": throughput over time (median run)"
			if err := draw(filepath.Join(dir, file), title, "time since start (s)", "successful ops/s", false, tps); err != nil {
				return out, err
			}
			out = append(out, Plot{Title: title, File: file})
		}
	}
	return out, nil
}

func draw(path, title, xLabel, yLabel string, logX bool, ss []series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	p.Y.Min = 0
	// CDFs rise from the bottom left: their legend goes top left;
	// throughput lines run along the top: theirs goes bottom left.
	p.Legend.Left, p.Legend.Top = true, logX
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Max = 1
	}
	for i, s := range ss {
		l, err := plotter.NewLine(s.xys)
		if err != nil {
			return fmt.Errorf("cannot plot %s: %w", s.name, err)
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / len(plotutil.SoftColors))
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	height := 5*vg.Inch + vg.Length(max(len(ss)-8, 0))*0.2*vg.Inch
	if err := p.Save(9*vg.Inch, height, path); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}
