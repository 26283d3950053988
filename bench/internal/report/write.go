package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// Files are the paths Write produced.
type Files struct {
	JSON, Markdown string
	Plots          []string
}

// Write renders r into dir (created if needed): results.json, the PNG
// plots and results.md linking them.
func Write(dir string, r *Results) (*Files, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", dir, err)
	}
	f := &Files{JSON: filepath.Join(dir, "results.json"), Markdown: filepath.Join(dir, "results.md")}
	dropNonFinite(r)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("cannot encode results: %w", err)
	}
	if err := os.WriteFile(f.JSON, append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	plots, err := Plots(dir, r)
	if err != nil {
		return nil, err
	}
	for _, p := range plots {
		f.Plots = append(f.Plots, filepath.Join(dir, p.File))
	}
	var md bytes.Buffer
	if err := Markdown(&md, r, plots); err != nil {
		return nil, err
	}
	if err := os.WriteFile(f.Markdown, md.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return f, nil
}

// Load reads a results.json.
func Load(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("cannot parse %s: %w", path, err)
	}
	if r.Schema != SchemaVersion {
		return nil, fmt.Errorf("%s has schema %d, want %d", path, r.Schema, SchemaVersion)
	}
	return &r, nil
}

// dropNonFinite removes NaN and infinite figures (a run that could not
// measure one), which JSON cannot hold.
func dropNonFinite(r *Results) {
	for i := range r.Scenarios {
		for j := range r.Scenarios[i].Results {
			for _, run := range r.Scenarios[i].Results[j].Runs {
				for k, v := range run.Figures {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						delete(run.Figures, k)
					}
				}
				for k, v := range run.Throughput {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						run.Throughput[k] = 0
					}
				}
			}
		}
	}
}
