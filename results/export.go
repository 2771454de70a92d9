package results

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CSVHeader is the header row WriteCSV writes.
var CSVHeader = []string{"experiment", "scenario", "trial", "probe", "metric", "value", "unit", "time", "labels"}

// WriteCSV writes samples as CSV (RFC 4180) with the header CSVHeader, one
// row per sample in the given order. value is the shortest decimal that
// reads back as the same float64 ("NaN", "+Inf", "-Inf" for non-finite
// values); time is RFC 3339 with nanoseconds in UTC, empty for the zero
// time; labels are k=v pairs joined by ";", sorted by key.
func WriteCSV(w io.Writer, samples []Sample) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return fmt.Errorf("write samples CSV: %w", err)
	}
	for _, x := range samples {
		ts := ""
		if !x.Time.IsZero() {
			ts = x.Time.UTC().Format(time.RFC3339Nano)
		}
		rec := []string{
			x.Experiment, x.Scenario, strconv.Itoa(x.Trial), x.Probe, x.Metric,
			strconv.FormatFloat(x.Value, 'f', -1, 64), x.Unit, ts, FormatLabels(x.Labels),
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write samples CSV: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write samples CSV: %w", err)
	}
	return nil
}

// FormatLabels renders labels as k=v pairs sorted by key and joined by ";"
// ("" for no labels), the form WriteCSV uses.
func FormatLabels(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(labels[k])
	}
	return b.String()
}

// jsonSample mirrors Sample for WriteJSONL; Value is a pointer so that a
// non-finite value, which JSON cannot hold, is written as null.
type jsonSample struct {
	Experiment string            `json:"experiment"`
	Scenario   string            `json:"scenario"`
	Trial      int               `json:"trial"`
	Probe      string            `json:"probe"`
	Metric     string            `json:"metric"`
	Value      *float64          `json:"value"`
	Unit       string            `json:"unit"`
	Time       time.Time         `json:"time"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// WriteJSONL writes samples as JSON Lines, one object per sample in the
// given order, with the field names of Sample's JSON tags. Times are in UTC;
// a NaN or infinite value, which JSON cannot represent, is written as null.
func WriteJSONL(w io.Writer, samples []Sample) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, x := range samples {
		js := jsonSample{
			Experiment: x.Experiment, Scenario: x.Scenario, Trial: x.Trial,
			Probe: x.Probe, Metric: x.Metric, Unit: x.Unit,
			Time: x.Time.UTC(), Labels: x.Labels,
		}
		if !math.IsNaN(x.Value) && !math.IsInf(x.Value, 0) {
			v := x.Value
			js.Value = &v
		}
		if err := enc.Encode(js); err != nil {
			return fmt.Errorf("write samples JSONL: %w", err)
		}
	}
	return nil
}
