package report

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Files Write creates inside its directory.
const (
	SummaryFile    = "summary.md"
	ThroughputFile = "throughput.png"
	LagFile        = "lag.png"
)

// Write renders r into dir, creating dir if needed: SummaryFile,
// ThroughputFile and LagFile. Existing files of those names are replaced.
func Write(dir string, r *Run) error {
	if r == nil {
		return errors.New("report: nil run")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", dir, err)
	}
	var md bytes.Buffer
	writeSummary(&md, r)
	path := filepath.Join(dir, SummaryFile)
	if err := os.WriteFile(path, md.Bytes(), 0o644); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := plotThroughput(filepath.Join(dir, ThroughputFile), r); err != nil {
		return fmt.Errorf("cannot plot throughput: %w", err)
	}
	if err := plotLag(filepath.Join(dir, LagFile), r); err != nil {
		return fmt.Errorf("cannot plot watch lag: %w", err)
	}
	return nil
}
