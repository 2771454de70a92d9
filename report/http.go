package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/stats"
)

// NotMeasuredHTTP is shown for a published HTTP figure whose scenario,
// object and concurrency this run has no measured figure for (and the
// PublishedHTTP row has no Text saying why).
const NotMeasuredHTTP = "not measured in this run"

// noObjectLabel is the object of HTTP samples without an object label.
const noObjectLabel = "(no object label)"

// kindLoad is the internal kind of load/count samples.
const kindLoad = "load_count"

// httpKinds maps the metrics of probe "http" to report metrics.
var httpKinds = map[string]string{
	"total_time":   MetricHTTPTotalTime,
	"rps":          MetricHTTPRPS,
	"errors":       MetricHTTPErrors,
	"non2xx":       MetricHTTPNon2xx,
	"bytes":        MetricHTTPBytes,
	"requests":     MetricHTTPRequests,
	"request_time": MetricHTTPRequestTime,
}

// HTTPPhases are the parts of a request's time the http probe dates (label phase of its
// phase_median samples): the TCP handshake, the wait from the request to the answer's first
// byte, the body, and the wait for the server's close.
var HTTPPhases = []string{"connect", "wait", "body", "close"}

// abKinds maps the metrics of probe "http-ab" (or "ab") the report reads.
var abKinds = map[string]string{
	"total_time": MetricABTotalTime,
	"rps":        MetricABRPS,
}

// HTTPMetric returns the SummaryCSV metric name of an HTTP figure (one of
// the MetricHTTP* or MetricAB* constants) for one object and concurrency,
// e.g. HTTPMetric(MetricHTTPTotalTime, "1k", 100) == "http_total_time:1k:c100".
func HTTPMetric(metric, object string, concurrency int) string {
	return metric + ":" + object + ":c" + strconv.Itoa(concurrency)
}

// HTTPRow is the HTTP load figures of one scenario for one object and
// concurrency.
type HTTPRow struct {
	// Scenario is the scenario of the row.
	Scenario string
	// Object is the object's size name (label object), e.g. "10k".
	Object string
	// Size is Object in bytes (spec.ParseSize); 0 when Object is not a
	// size.
	Size int64
	// Concurrency is the number of requests in flight (label concurrency;
	// 0 when the label is missing or not a positive number).
	Concurrency int
	// Via is how the requests went: "proxy", "direct", both joined by "+",
	// or "" when the samples do not say (label via).
	Via string
	// KeepAlive is the keepalive label: "true", "false", both joined by "+",
	// or "".
	KeepAlive string
	// Trials are the trial numbers with a total time, ascending.
	Trials []int
	// TotalTime summarises the per-trial total time of the run, in s: its
	// Mean ± CI95Half is the figure study B reports.
	TotalTime stats.Summary
	// RPS summarises the per-trial finished requests per second.
	RPS stats.Summary
	// Requests summarises the per-trial finished requests.
	Requests stats.Summary
	// Errors and Non2xx summarise the per-trial counts of requests without
	// a complete answer and of answers outside 200-299.
	Errors, Non2xx stats.Summary
	// ErrorCount and Non2xxCount are those counts summed over all trials.
	ErrorCount, Non2xxCount int64
	// Bytes summarises the per-trial body bytes received.
	Bytes stats.Summary
	// RequestTime summarises every answered request of all trials pooled,
	// in ms (its CI is not meaningful: requests of one run are not
	// independent).
	RequestTime stats.Summary
	// Phases summarises, per phase of HTTPPhases, the per-trial median time of that part
	// of a request, in ms; nil when the probe did not date them.
	Phases map[string]stats.Summary
	// AB summarises Apache Bench's per-trial total time for a run with the
	// same settings, in s; N == 0 where ab did not run.
	AB stats.Summary
	// ABRPS summarises Apache Bench's per-trial requests per second.
	ABRPS stats.Summary
	// Baseline is the scenario the row is compared with: the report's
	// baseline unless Published.HTTPBaselines says otherwise.
	Baseline string
	// IsBaseline marks the rows of a scenario compared with itself.
	IsBaseline bool
	// Change is (T − T_base) / T_base × 100 of the mean total times against
	// Baseline for the same object and concurrency (positive: slower); NaN
	// for baseline rows and when either has no data.
	Change float64

	// totals are the per-trial total times, s, in the order of Trials.
	totals []float64
}

// DeployRow is the deploy time of one scenario, in ms, over trials.
type DeployRow struct {
	// Scenario is the scenario of the row.
	Scenario string
	// Nodes is the nodes label of the samples (the lab's number of nodes),
	// distinct values joined by "/"; "" when absent.
	Nodes string
	// Trials are the trial numbers with a deploy time, ascending.
	Trials []int
	// Summary summarises the per-trial deploy times, in ms.
	Summary stats.Summary
	// IsBaseline marks the baseline row.
	IsBaseline bool
	// Diff is the difference of the mean against the baseline's, in ms
	// (NaN for the baseline and when either has no data).
	Diff float64
	// Change is Diff in percent of the baseline's mean.
	Change float64
}

// LoadRow is the background load one scenario ran with.
type LoadRow struct {
	// Scenario is the scenario that ran with the load.
	Scenario string
	// Kind is the kind of load (label kind): "cpu" (busy processes) or
	// "network" (TCP streams).
	Kind string
	// Node is the loaded node (label node).
	Node string
	// Counts are the distinct numbers of processes or streams, ascending.
	Counts []float64
}

// HTTPComparisonRow is one published HTTP figure beside the measured one.
type HTTPComparisonRow struct {
	// Scenario, Object and Concurrency are copied from the PublishedHTTP.
	Scenario, Object string
	// Concurrency is the number of requests in flight.
	Concurrency int
	// Published and PublishedCI are the published mean and 95 % CI
	// half-width, in s (NaN when not given).
	Published, PublishedCI float64
	// Text is the PublishedHTTP's Text.
	Text string
	// Measured and MeasuredCI are this run's mean total time and its
	// Student t 95 % CI half-width across trials, in s (NaN when not
	// measured).
	Measured, MeasuredCI float64
	// MeasuredText is shown when there is no measured figure: Text, or
	// NotMeasuredHTTP.
	MeasuredText string
	// Ratio is Measured / Published when both ran Published.HTTPRequests
	// requests; when the counts differ it is the ratio of the times per
	// request and PerRequest is set; NaN when either is missing or the
	// published count is unknown.
	Ratio float64
	// PerRequest marks a Ratio of times per request.
	PerRequest bool
	// Baseline is the scenario the changes are computed against.
	Baseline string
	// IsBaseline marks rows of a scenario compared with itself.
	IsBaseline bool
	// PublishedChange is (T − T_base) / T_base × 100 of the published
	// figures against the published figure of Baseline for the same object
	// and concurrency (NaN when not available).
	PublishedChange float64
	// MeasuredChange is the same of this run's figures (HTTPRow.Change).
	MeasuredChange float64
}

type httpKey struct {
	scenario, object string
	concurrency      int
}

// httpData is what one scenario measured for one object and concurrency.
type httpData struct {
	metrics         map[string]perTrial // report metric -> trial -> value
	pooled          []float64           // request times, ms
	phases          map[string]perTrial // phase -> trial -> median ms
	errSum, non2Sum float64
	via, keepalive  []string
}

type loadKey struct{ kind, node string }

func addTrial(p perTrial, trial int, v float64) perTrial {
	if p == nil {
		p = perTrial{}
	}
	p.add(trial, v)
	return p
}

func appendNew(xs []string, x string) []string {
	if x == "" || slices.Contains(xs, x) {
		return xs
	}
	return append(xs, x)
}

// addHTTP files one sample of probe http or http-ab; it returns false when
// the concurrency label is not a positive number (the sample is filed under
// concurrency 0).
func (c *collected) addHTTP(kind string, x results.Sample, v float64) bool {
	obj := x.Labels["object"]
	if obj == "" {
		obj = noObjectLabel
	}
	conc, err := strconv.Atoi(x.Labels["concurrency"])
	ok := err == nil && conc > 0
	if !ok {
		conc = 0
	}
	k := httpKey{x.Scenario, obj, conc}
	d := c.http[k]
	if d == nil {
		d = &httpData{metrics: map[string]perTrial{}}
		c.http[k] = d
	}
	switch kind {
	case MetricHTTPRequestTime:
		d.pooled = append(d.pooled, v)
	case MetricHTTPPhase:
		if d.phases == nil {
			d.phases = map[string]perTrial{}
		}
		ph := x.Labels["phase"]
		d.phases[ph] = addTrial(d.phases[ph], x.Trial, v)
	default:
		d.metrics[kind] = addTrial(d.metrics[kind], x.Trial, v)
	}
	switch kind {
	case MetricHTTPErrors:
		d.errSum += v
	case MetricHTTPNon2xx:
		d.non2Sum += v
	}
	if x.Probe == "http" {
		d.via = appendNew(d.via, x.Labels["via"])
		d.keepalive = appendNew(d.keepalive, x.Labels["keepalive"])
	}
	return ok
}

func (c *collected) addLoad(x results.Sample, v float64) {
	k := loadKey{x.Labels["kind"], x.Labels["node"]}
	m := c.load[x.Scenario]
	if m == nil {
		m = map[loadKey][]float64{}
		c.load[x.Scenario] = m
	}
	if _, seen := m[k]; !seen {
		c.loadOrder[x.Scenario] = append(c.loadOrder[x.Scenario], k)
	}
	if !slices.Contains(m[k], v) {
		m[k] = append(m[k], v)
	}
}

// compareObjects orders object size names by size (spec.ParseSize), names
// that are no size after those that are, by name.
func compareObjects(a, b string) int {
	sa, ea := spec.ParseSize(a)
	sb, eb := spec.ParseSize(b)
	switch {
	case ea == nil && eb == nil:
		return cmp.Or(cmp.Compare(sa, sb), strings.Compare(a, b))
	case ea == nil:
		return -1
	case eb == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// sameObject reports whether two object names are the same object: equal
// names, or names of the same size.
func sameObject(a, b string) bool {
	if a == b {
		return true
	}
	sa, ea := spec.ParseSize(a)
	sb, eb := spec.ParseSize(b)
	return ea == nil && eb == nil && sa == sb
}

// httpBaseline returns the scenario s is compared with in the HTTP tables.
func (r *Report) httpBaseline(s string) string {
	if b := r.httpBaselines[s]; b != "" {
		return b
	}
	return r.Baseline
}

func (r *Report) buildHTTP(c *collected) {
	if len(c.http) == 0 {
		return
	}
	type caseKey struct {
		object      string
		concurrency int
	}
	var cases []caseKey
	has := map[string]bool{}
	for k := range c.http {
		has[k.scenario] = true
		if ck := (caseKey{k.object, k.concurrency}); !slices.Contains(cases, ck) {
			cases = append(cases, ck)
		}
	}
	slices.SortFunc(cases, func(a, b caseKey) int {
		return cmp.Or(cmp.Compare(a.concurrency, b.concurrency), compareObjects(a.object, b.object))
	})
	idx := map[httpKey]int{}
	for _, ck := range cases {
		size, err := spec.ParseSize(ck.object)
		if err != nil {
			size = 0
		}
		for _, s := range r.Scenarios {
			if !has[s] {
				continue
			}
			k := httpKey{s, ck.object, ck.concurrency}
			d := c.http[k]
			if d == nil {
				d = &httpData{}
			}
			row := HTTPRow{Scenario: s, Object: ck.object, Size: size, Concurrency: ck.concurrency,
				Via: strings.Join(d.via, "+"), KeepAlive: strings.Join(d.keepalive, "+"),
				ErrorCount: int64(math.Round(d.errSum)), Non2xxCount: int64(math.Round(d.non2Sum)),
				Baseline: r.httpBaseline(s), Change: math.NaN()}
			row.IsBaseline = row.Baseline == s
			sum := func(metric string) stats.Summary {
				_, v := d.metrics[metric].means()
				return stats.Summarize(v)
			}
			row.Trials, row.totals = d.metrics[MetricHTTPTotalTime].means()
			row.TotalTime = sum(MetricHTTPTotalTime)
			row.RPS = sum(MetricHTTPRPS)
			row.Requests = sum(MetricHTTPRequests)
			row.Errors = sum(MetricHTTPErrors)
			row.Non2xx = sum(MetricHTTPNon2xx)
			row.Bytes = sum(MetricHTTPBytes)
			row.AB = sum(MetricABTotalTime)
			row.ABRPS = sum(MetricABRPS)
			row.RequestTime = stats.Summarize(d.pooled)
			for _, ph := range HTTPPhases {
				if pt := d.phases[ph]; len(pt) > 0 {
					if row.Phases == nil {
						row.Phases = map[string]stats.Summary{}
					}
					_, v := pt.means()
					row.Phases[ph] = stats.Summarize(v)
				}
			}
			idx[k] = len(r.HTTP)
			r.HTTP = append(r.HTTP, row)
		}
	}
	for i := range r.HTTP {
		row := &r.HTTP[i]
		j, ok := idx[httpKey{row.Baseline, row.Object, row.Concurrency}]
		// An emulated CPU's request times against a real CPU's: no change is computed.
		if row.IsBaseline || !ok || r.Incomparable(row.Scenario, row.Baseline) {
			continue
		}
		if base := r.HTTP[j]; base.TotalTime.N > 0 && row.TotalTime.N > 0 {
			row.Change = stats.Increase(base.TotalTime.Mean, row.TotalTime.Mean)
		}
	}
}

// HTTPRatio is row's total time over its baseline row's (same object and concurrency),
// paired by repetition; false for a baseline row or when the baseline has no such row.
func (r *Report) HTTPRatio(row HTTPRow) (Ratio, bool) {
	if row.IsBaseline {
		return Ratio{}, false
	}
	for _, b := range r.HTTP {
		if b.Scenario == row.Baseline && b.Object == row.Object && b.Concurrency == row.Concurrency && len(b.totals) > 0 && len(row.totals) > 0 {
			return pairedRatio(row.Scenario, b.Scenario, row.Trials, row.totals, b.Trials, b.totals), true
		}
	}
	return Ratio{}, false
}

func (r *Report) buildDeploy(c *collected) {
	var base *DeployRow
	for _, s := range r.Scenarios {
		pt := c.deploy[s]
		if len(pt) == 0 {
			continue
		}
		trials, v := pt.means()
		r.Deploy = append(r.Deploy, DeployRow{Scenario: s, Nodes: strings.Join(c.deployNodes[s], "/"), Trials: trials,
			Summary: stats.Summarize(v), IsBaseline: s == r.Baseline, Diff: math.NaN(), Change: math.NaN()})
	}
	for i := range r.Deploy {
		if r.Deploy[i].IsBaseline {
			base = &r.Deploy[i]
		}
	}
	for i := range r.Deploy {
		row := &r.Deploy[i]
		if row.IsBaseline || base == nil || base.Summary.N == 0 || row.Summary.N == 0 {
			continue
		}
		row.Diff = row.Summary.Mean - base.Summary.Mean
		row.Change = stats.Increase(base.Summary.Mean, row.Summary.Mean)
	}
}

func (r *Report) buildLoad(c *collected) {
	for _, s := range r.Scenarios {
		for _, k := range c.loadOrder[s] {
			counts := slices.Clone(c.load[s][k])
			slices.Sort(counts)
			r.Load = append(r.Load, LoadRow{Scenario: s, Kind: k.kind, Node: k.node, Counts: counts})
		}
	}
}

// checkPublishedHTTP validates the published HTTP rows and baselines.
func (r *Report) checkPublishedHTTP(p *Published) error {
	names := map[string]bool{}
	for _, s := range r.Scenarios {
		names[s] = true
	}
	for i, h := range p.HTTP {
		what := fmt.Sprintf("published HTTP row %d (%s %s c%d)", i+1, h.Scenario, h.Object, h.Concurrency)
		switch {
		case h.Scenario == "":
			return fmt.Errorf("%s: no scenario", what)
		case h.Object == "":
			return fmt.Errorf("%s: no object", what)
		case h.Concurrency < 1:
			return fmt.Errorf("%s: concurrency %d is not a positive number", what, h.Concurrency)
		case math.IsNaN(h.Seconds) || math.IsInf(h.Seconds, 0) || h.Seconds < 0:
			return fmt.Errorf("%s: seconds %v is not a time", what, h.Seconds)
		case math.IsInf(h.CI, 0) || h.CI < 0:
			return fmt.Errorf("%s: CI %v is not a half-width", what, h.CI)
		case h.Seconds == 0 && h.Text == "":
			return fmt.Errorf("%s: neither seconds nor a text", what)
		}
		names[h.Scenario] = true
	}
	for _, s := range sortedKeys(p.HTTPBaselines) {
		if b := p.HTTPBaselines[s]; b != "" && !names[b] {
			return fmt.Errorf("HTTP baseline of %s: %q is neither a scenario of the run nor of the published HTTP rows", s, b)
		}
	}
	return nil
}

func (r *Report) buildHTTPComparison(p *Published) {
	r.Comparison.Notes = p.Notes
	measured := func(s, object string, conc int) *HTTPRow {
		for i := range r.HTTP {
			row := &r.HTTP[i]
			if row.Scenario == s && row.Concurrency == conc && sameObject(row.Object, object) && row.TotalTime.N > 0 {
				return row
			}
		}
		return nil
	}
	nanIfNot := func(v float64) float64 {
		if v > 0 {
			return v
		}
		return math.NaN()
	}
	for _, h := range p.HTTP {
		row := HTTPComparisonRow{Scenario: h.Scenario, Object: h.Object, Concurrency: h.Concurrency,
			Published: nanIfNot(h.Seconds), PublishedCI: nanIfNot(h.CI), Text: h.Text,
			Measured: math.NaN(), MeasuredCI: math.NaN(), Ratio: math.NaN(),
			Baseline: r.httpBaseline(h.Scenario), PublishedChange: math.NaN(), MeasuredChange: math.NaN()}
		row.IsBaseline = row.Baseline == h.Scenario
		if m := measured(h.Scenario, h.Object, h.Concurrency); m != nil {
			row.Measured, row.MeasuredCI, row.MeasuredChange = m.TotalTime.Mean, m.TotalTime.CI95Half, m.Change
			row.Ratio, row.PerRequest = httpRatio(m, row.Published, p.HTTPRequests)
			if r.Emulated(h.Scenario) { // a TCG guest's time is not a KVM guest's: no ratio to it
				row.Text, row.Ratio = EmulatedMark, math.NaN()
			}
		} else {
			row.MeasuredText = cmp.Or(r.NotRun(h.Scenario), h.Text, NotMeasuredHTTP)
		}
		if !row.IsBaseline && h.Seconds > 0 {
			for _, b := range p.HTTP {
				if b.Scenario == row.Baseline && b.Concurrency == h.Concurrency && sameObject(b.Object, h.Object) && b.Seconds > 0 {
					row.PublishedChange = stats.Increase(b.Seconds, h.Seconds)
					break
				}
			}
		}
		r.Comparison.HTTP = append(r.Comparison.HTTP, row)
	}
}

// httpRatio compares a measured HTTP row with a published time for
// published requests: times when every trial ran that many, else times per
// request.
func httpRatio(m *HTTPRow, published float64, requests int) (float64, bool) {
	if requests <= 0 || m.Requests.N == 0 || m.Requests.Mean <= 0 || math.IsNaN(published) {
		return math.NaN(), false
	}
	if m.Requests.Min == float64(requests) && m.Requests.Max == float64(requests) {
		return m.TotalTime.Mean / published, false
	}
	return (m.TotalTime.Mean / m.Requests.Mean) / (published / float64(requests)), true
}

// httpSummary adds the SummaryCSV rows of the HTTP figures of scenario s:
// only series with at least one value.
func (r *Report) httpSummary(s string, add func(s, metric, node, unit string, sum stats.Summary)) {
	for _, row := range r.HTTP {
		if row.Scenario != s {
			continue
		}
		pooled := row.RequestTime
		pooled.CI95Low, pooled.CI95High, pooled.CI95Half = math.NaN(), math.NaN(), math.NaN()
		for _, m := range []struct {
			metric, unit string
			sum          stats.Summary
		}{
			{MetricHTTPTotalTime, "s", row.TotalTime},
			{MetricHTTPRPS, "requests/s", row.RPS},
			{MetricHTTPRequests, "count", row.Requests},
			{MetricHTTPErrors, "count", row.Errors},
			{MetricHTTPNon2xx, "count", row.Non2xx},
			{MetricHTTPBytes, "count", row.Bytes},
			{MetricHTTPRequestTime, "ms", pooled},
			{MetricABTotalTime, "s", row.AB},
			{MetricABRPS, "requests/s", row.ABRPS},
		} {
			if m.sum.N > 0 {
				add(s, HTTPMetric(m.metric, row.Object, row.Concurrency), "", m.unit, m.sum)
			}
		}
	}
}

// concurrencyText formats a concurrency, "n/a" for 0 (unknown).
func concurrencyText(c int) string {
	if c <= 0 {
		return "n/a"
	}
	return strconv.Itoa(c)
}

// httpChartName is the name of the HTTP chart of one concurrency.
func httpChartName(concurrency int) string { return "http-c" + strconv.Itoa(concurrency) }

// httpConcurrencies returns the concurrencies of the HTTP rows, ascending.
func (r *Report) httpConcurrencies() []int {
	var out []int
	for _, row := range r.HTTP {
		if !slices.Contains(out, row.Concurrency) {
			out = append(out, row.Concurrency)
		}
	}
	slices.Sort(out)
	return out
}

// countRange formats the per-trial values of a count: one number when
// they are all equal, else "min–max".
func countRange(s stats.Summary) string {
	if s.N == 0 {
		return dash
	}
	if s.Min == s.Max {
		return fixed(s.Min, 0)
	}
	return fixed(s.Min, 0) + "–" + fixed(s.Max, 0)
}

// plusMinus formats a mean and a CI half-width as "m ± ci" (just "m" when
// the CI is not available).
func plusMinus(m, ci float64, prec int) string {
	if math.IsNaN(ci) || math.IsInf(ci, 0) {
		return fixed(m, prec)
	}
	return fixed(m, prec) + " ± " + fixed(ci, prec)
}

// scenarioList joins scenario names for a sentence.
func scenarioList(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// baselineText says what the HTTP rows are compared with: the report's
// baseline and the exceptions of Published.HTTPBaselines among scenarios.
func (r *Report) baselineText(scenarios []string) string {
	text := r.Baseline
	byBase := map[string][]string{}
	var bases []string
	for _, s := range scenarios {
		if b := r.httpBaseline(s); b != r.Baseline && b != s {
			if byBase[b] == nil {
				bases = append(bases, b)
			}
			byBase[b] = append(byBase[b], s)
		}
	}
	for _, b := range bases {
		text += fmt.Sprintf("; against %s for %s", b, scenarioList(byBase[b]))
	}
	return text
}

func (r *Report) httpSection() section {
	sec := section{id: "http", title: "HTTP load", level: 2}
	anyAB, anyNon2xx := false, false
	for _, row := range r.HTTP {
		anyAB = anyAB || row.AB.N > 0
		anyNon2xx = anyNon2xx || row.Non2xxCount > 0
	}
	header := []string{"scenario", "object", "concurrency", "trials", "requests per run", "mean total time s", "95 % CI ± s",
		"requests/s", "errors"}
	right := []bool{false, false, true, true, true, true, true, true, true}
	if anyNon2xx {
		header, right = append(header, "non-2xx"), append(right, true)
	}
	header = append(header, "request time median ms", "request time p99 ms")
	right = append(right, true, true)
	if anyAB {
		header, right = append(header, "ab total time s"), append(right, true)
	}
	header, right = append(header, "change vs baseline"), append(right, true)
	t := &table{id: "http-table", header: header, right: right}
	var scenarios []string
	for _, row := range r.HTTP {
		scenarios = appendNew(scenarios, row.Scenario)
		cells := []string{r.ScenarioLabel(row.Scenario), row.Object, concurrencyText(row.Concurrency), strconv.Itoa(row.TotalTime.N)}
		if row.TotalTime.N == 0 {
			cells = append(cells, countRange(row.Requests), "no data", dash, dash, strconv.FormatInt(row.ErrorCount, 10))
		} else {
			cells = append(cells, countRange(row.Requests), f3(row.TotalTime.Mean), fixed(row.TotalTime.CI95Half, 3),
				fixed(row.RPS.Mean, 1), strconv.FormatInt(row.ErrorCount, 10))
		}
		if anyNon2xx {
			cells = append(cells, strconv.FormatInt(row.Non2xxCount, 10))
		}
		if row.RequestTime.N == 0 {
			cells = append(cells, dash, dash)
		} else {
			cells = append(cells, f3(row.RequestTime.Median), f3(row.RequestTime.P99))
		}
		if anyAB {
			ab := "n/a"
			if row.AB.N > 0 {
				ab = f3(row.AB.Mean)
			}
			cells = append(cells, ab)
		}
		switch {
		case row.IsBaseline:
			cells = append(cells, "baseline")
		case row.TotalTime.N == 0:
			cells = append(cells, dash)
		case r.Incomparable(row.Scenario, row.Baseline):
			cells = append(cells, notComparable)
		default:
			cells = append(cells, pct(row.Change, true))
		}
		t.rows = append(t.rows, cells)
	}
	sec.blocks = append(sec.blocks, block{table: t})
	text := "Per run: the requests for one object at one concurrency, timed like Apache Bench — total time from the first request to the last answer (ab's \"Time taken for tests\"). " +
		"mean total time and its Student t 95 % CI half-width (±) are across trials, as study B reports mean ± CI; " +
		"requests per run: the finished requests of each trial; requests/s: the mean over trials; " +
		"errors: requests of all trials without a complete answer (connection errors, timeouts, short bodies; they count in the total time, as in ab)"
	if anyNon2xx {
		text += "; non-2xx: answers of all trials with a status outside 200-299"
	}
	text += "; request time: connect to last body byte of every answered request of all trials pooled. "
	if anyAB {
		text += "ab total time: Apache Bench's \"Time taken for tests\" for a run with the same settings, mean over trials; n/a where ab did not run. "
	}
	text += "change = (T − T_base) / T_base × 100 % of the mean total times for the same object and concurrency against " +
		r.baselineText(scenarios) + " (positive: slower)."
	sec.blocks = append(sec.blocks, block{para: text})
	if s := r.httpSetupText(scenarios); s != "" {
		sec.blocks = append(sec.blocks, block{para: s})
	}
	if t := r.httpPhaseTable(); t != nil {
		sec.blocks = append(sec.blocks, block{table: t}, block{para: "Where a request's time goes: the median of each part over a run's answered requests, " +
			"mean over trials, in ms — connect: the TCP handshake to the first hop; wait: from the request sent to the answer's first byte " +
			"(the proxy's work, its connection to the origin and the origin's answer); body: first to last byte of the body; " +
			"close: from the last byte to the server's close (ab without -k waits for it too). " +
			"change: the sum of the four medians against the baseline's (positive: slower)."})
	}
	for _, c := range r.httpConcurrencies() {
		sec.blocks = append(sec.blocks, block{chart: httpChartName(c)})
	}
	return sec
}

// httpPhaseTable is the table of request phases, or nil when no row has them.
func (r *Report) httpPhaseTable() *table {
	idx := map[httpKey]int{}
	has := false
	for i, row := range r.HTTP {
		idx[httpKey{row.Scenario, row.Object, row.Concurrency}] = i
		has = has || row.Phases != nil
	}
	if !has {
		return nil
	}
	t := &table{id: "http-phase-table",
		header: []string{"scenario", "object", "concurrency", "connect ms", "wait ms", "body ms", "close ms", "change vs baseline"},
		right:  []bool{false, false, true, true, true, true, true, true}}
	total := func(row HTTPRow) float64 {
		s := 0.0
		for _, ph := range HTTPPhases {
			s += row.Phases[ph].Mean
		}
		return s
	}
	for _, row := range r.HTTP {
		if row.Phases == nil {
			continue
		}
		cells := []string{r.ScenarioLabel(row.Scenario), row.Object, concurrencyText(row.Concurrency)}
		for _, ph := range HTTPPhases {
			if q := row.Phases[ph]; q.N > 0 {
				cells = append(cells, f3(q.Mean))
			} else {
				cells = append(cells, dash)
			}
		}
		j, ok := idx[httpKey{row.Baseline, row.Object, row.Concurrency}]
		switch {
		case row.IsBaseline:
			cells = append(cells, "baseline")
		case r.Incomparable(row.Scenario, row.Baseline):
			cells = append(cells, notComparable)
		case !ok || r.HTTP[j].Phases == nil:
			cells = append(cells, dash)
		default:
			cells = append(cells, pct(stats.Increase(total(r.HTTP[j]), total(row)), true))
		}
		t.rows = append(t.rows, cells)
	}
	return t
}

// httpSetupText says how the requests went (via the proxy or not) and
// whether connections were kept alive, by scenario.
func (r *Report) httpSetupText(scenarios []string) string {
	group := func(get func(HTTPRow) string) ([]string, map[string][]string) {
		var vals []string
		by := map[string][]string{}
		for _, s := range scenarios {
			var v []string
			for _, row := range r.HTTP {
				if row.Scenario == s {
					for _, x := range strings.Split(get(row), "+") {
						v = appendNew(v, x)
					}
				}
			}
			key := strings.Join(v, "+")
			if by[key] == nil {
				vals = append(vals, key)
			}
			by[key] = append(by[key], s)
		}
		return vals, by
	}
	var parts []string
	vias, byVia := group(func(row HTTPRow) string { return row.Via })
	viaName := map[string]string{"proxy": "through the HTTP proxy", "direct": "straight to the origin",
		"proxy+direct": "partly through the proxy, partly straight to the origin", "direct+proxy": "partly straight to the origin, partly through the proxy"}
	var via []string
	for _, v := range vias {
		if v == "" {
			continue
		}
		name := cmp.Or(viaName[v], "via "+v)
		if len(vias) == 1 {
			via = append(via, name)
		} else {
			via = append(via, name+" in "+scenarioList(byVia[v]))
		}
	}
	if len(via) > 0 {
		parts = append(parts, "Requests went "+strings.Join(via, "; ")+".")
	}
	kas, byKA := group(func(row HTTPRow) string { return row.KeepAlive })
	kaName := map[string]string{"true": "on", "false": "off (one connection per request, as ab without -k)"}
	var ka []string
	for _, v := range kas {
		if v == "" {
			continue
		}
		name := cmp.Or(kaName[v], v)
		if len(kas) == 1 {
			ka = append(ka, name)
		} else {
			ka = append(ka, name+" in "+scenarioList(byKA[v]))
		}
	}
	if len(ka) > 0 {
		parts = append(parts, "Keep-alive: "+strings.Join(ka, "; ")+".")
	}
	return strings.Join(parts, " ")
}

func (r *Report) deploySection() section {
	sec := section{id: "deploy", title: "Deploy time", level: 2}
	anyNodes := false
	for _, row := range r.Deploy {
		anyNodes = anyNodes || row.Nodes != ""
	}
	header := []string{"scenario"}
	right := []bool{false}
	if anyNodes {
		header, right = append(header, "nodes"), append(right, true)
	}
	header = append(header, "n", "mean ms", "stdev ms", "95 % CI ms", "min ms", "max ms", "change vs baseline")
	right = append(right, true, true, true, true, true, true, true)
	t := &table{id: "deploy-table", header: header, right: right}
	for _, row := range r.Deploy {
		s := row.Summary
		cells := []string{r.ScenarioLabel(row.Scenario)}
		if anyNodes {
			cells = append(cells, orDash(row.Nodes))
		}
		change := dash
		switch {
		case row.IsBaseline:
			change = "baseline"
		case r.Incomparable(row.Scenario, r.Baseline): // an emulated guest's boot is no KVM guest's
			change = notComparable
		case !math.IsNaN(row.Diff):
			d := fixed(row.Diff, 1)
			if !strings.HasPrefix(d, "-") && d != "0.0" {
				d = "+" + d
			}
			change = d + " ms (" + pct(row.Change, true) + ")"
		}
		cells = append(cells, strconv.Itoa(s.N), fixed(s.Mean, 1), fixed(s.Stdev, 1), ciRange(s.CI95Low, s.CI95High, 1),
			fixed(s.Min, 1), fixed(s.Max, 1), change)
		t.rows = append(t.rows, cells)
	}
	text := "Per trial: the time the deployer took to bring the scenario's lab up, before any probe ran. " +
		"mean, stdev and the Student t 95 % CI are across trials; change: the difference of the means against " + r.Baseline + "."
	if anyNodes {
		text += " nodes: the number of nodes of the lab."
	}
	sec.blocks = append(sec.blocks, block{table: t}, block{para: text})
	return sec
}

// loadText states the background load of the run in one sentence, "" when
// no scenario ran with one.
func (r *Report) loadText() string {
	if len(r.Load) == 0 {
		return ""
	}
	desc := map[string][]string{}
	for _, l := range r.Load {
		var counts []string
		for _, c := range l.Counts {
			counts = append(counts, fixed(c, 0))
		}
		n := strings.Join(counts, "/")
		one := 2
		if len(l.Counts) == 1 && l.Counts[0] == 1 {
			one = 1
		}
		var d string
		switch l.Kind {
		case "cpu":
			d = fmt.Sprintf("%s cpu %s on %s", n, plural(one, "process", "processes"), orDash(l.Node))
		case "network":
			d = fmt.Sprintf("%s network %s from %s", n, plural(one, "stream", "streams"), orDash(l.Node))
		default:
			d = fmt.Sprintf("%s × %s load on %s", n, cmp.Or(l.Kind, "unnamed"), orDash(l.Node))
		}
		desc[l.Scenario] = append(desc[l.Scenario], d)
	}
	var texts []string
	by := map[string][]string{}
	for _, s := range r.Scenarios {
		d := strings.Join(desc[s], " and ")
		if d == "" {
			d = "none"
		}
		if by[d] == nil {
			texts = append(texts, d)
		}
		by[d] = append(by[d], s)
	}
	if len(texts) == 1 {
		return "Background load: " + texts[0] + "."
	}
	var parts []string
	for _, d := range texts {
		parts = append(parts, d+" in "+scenarioList(by[d]))
	}
	return "Background load: " + strings.Join(parts, "; ") + "."
}

// publishedHTTPSection is the table of published HTTP figures beside the
// measured ones.
func (r *Report) publishedHTTPSection() section {
	c := r.Comparison
	sec := section{id: "published-http", title: "Published vs measured (HTTP)", level: 3}
	var reqs []float64
	for _, row := range r.HTTP {
		if row.Requests.N > 0 {
			for _, v := range []float64{row.Requests.Min, row.Requests.Max} {
				if !slices.Contains(reqs, v) {
					reqs = append(reqs, v)
				}
			}
		}
	}
	slices.Sort(reqs)
	text := "published: the study's mean ± 95 % CI, in s for the study's number of requests; " +
		"measured: this run's mean total time ± its Student t 95 % CI half-width across trials, in s"
	switch len(reqs) {
	case 0:
	case 1:
		text += fmt.Sprintf(" (%s requests per run)", fixed(reqs[0], 0))
	default:
		text += fmt.Sprintf(" (%s to %s requests per run)", fixed(reqs[0], 0), fixed(reqs[len(reqs)-1], 0))
	}
	text += ". measured / published compares times only when both ran the same number of requests"
	if c.HTTPRequests > 0 {
		text += fmt.Sprintf(" (the study: %d); otherwise it compares the times per request and says so", c.HTTPRequests)
	} else {
		text += "; the study's count is not known, so there is no ratio"
	}
	text += ". " +
		"The changes are (T − T_base) / T_base × 100 % against the scenario in \"compared with\" for the same object and concurrency: " +
		"published from the published figures, measured from this run's."
	t := &table{id: "published-http-table",
		header: []string{"scenario", "object", "concurrency", "published", "measured (this run)", "measured / published",
			"compared with", "published change", "measured change (this run)"},
		right: []bool{false, false, true, true, true, true, false, true, true}}
	for _, row := range c.HTTP {
		pub := dash
		if !math.IsNaN(row.Published) {
			pub = plusMinus(row.Published, row.PublishedCI, 2) + " s"
		}
		meas := row.MeasuredText
		if meas == "" {
			meas = plusMinus(row.Measured, row.MeasuredCI, 3) + " s"
			if row.Text != "" {
				meas += " (" + row.Text + ")"
			}
		}
		ratio := dash
		if !math.IsNaN(row.Ratio) {
			ratio = fixed(row.Ratio, 2) + "×"
			if row.PerRequest {
				ratio += " per request"
			}
		}
		pc, mc := dash, dash
		if row.IsBaseline {
			// A baseline without a figure is no baseline to anything.
			if !math.IsNaN(row.Published) {
				pc = "baseline"
			}
			if !math.IsNaN(row.Measured) {
				mc = "baseline"
			}
		} else {
			if !math.IsNaN(row.PublishedChange) {
				pc = pct(row.PublishedChange, true)
			}
			if !math.IsNaN(row.MeasuredChange) {
				mc = pct(row.MeasuredChange, true)
			} else if !math.IsNaN(row.Measured) && r.Incomparable(row.Scenario, row.Baseline) {
				mc = notComparable
			}
		}
		t.rows = append(t.rows, []string{row.Scenario, row.Object, strconv.Itoa(row.Concurrency), pub, meas, ratio,
			row.Baseline, pc, mc})
	}
	sec.blocks = append(sec.blocks, block{para: text}, block{table: t})
	return sec
}
