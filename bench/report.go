package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/results"
)

// ReportFiles are the files WriteReport writes into a run directory.
var ReportFiles = []string{"report.md", "report.html", "summary.csv", "samples.csv", "samples.jsonl"}

// WriteReport recomputes statistics and the report of a run from its stored samples alone and
// writes report.md, report.html, summary.csv and the raw samples as CSV and JSONL. Published
// figures come from published (nil when the run reproduces no study).
func WriteReport(dir string, published *report.Published, scenarios []string, baseline string) (*report.Report, error) {
	store, err := results.Open(filepath.Join(dir, "results.db"))
	if err != nil {
		return nil, fmt.Errorf("open results of %s: %w", dir, err)
	}
	defer store.Close()
	run, err := store.Run()
	if err != nil {
		return nil, err
	}
	trials, err := store.Trials()
	if err != nil {
		return nil, err
	}
	samples, err := store.Samples()
	if err != nil {
		return nil, err
	}
	rep, err := report.Build(report.Input{Run: run, Trials: trials, Samples: samples,
		Scenarios: scenarios, Baseline: baseline, Published: published})
	if err != nil {
		return nil, fmt.Errorf("build report: %w", err)
	}
	// Charts first, so the Markdown links them (SVG files beside report.md).
	if _, err := rep.WriteCharts(dir); err != nil {
		return nil, err
	}
	writers := map[string]func(*bytes.Buffer) error{
		"report.md":     func(b *bytes.Buffer) error { return rep.Markdown(b) },
		"report.html":   func(b *bytes.Buffer) error { return rep.HTML(b) },
		"summary.csv":   func(b *bytes.Buffer) error { return rep.SummaryCSV(b) },
		"samples.csv":   func(b *bytes.Buffer) error { return results.WriteCSV(b, samples) },
		"samples.jsonl": func(b *bytes.Buffer) error { return results.WriteJSONL(b, samples) },
	}
	for _, name := range ReportFiles {
		var buf bytes.Buffer
		if err := writers[name](&buf); err != nil {
			return nil, fmt.Errorf("render %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	return rep, nil
}

// ReadRun reads the run record of a run directory.
func ReadRun(dir string) (results.Run, error) {
	store, err := results.Open(filepath.Join(dir, "results.db"))
	if err != nil {
		return results.Run{}, fmt.Errorf("open results of %s: %w", dir, err)
	}
	defer store.Close()
	return store.Run()
}
