package http

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
)

// ABName is the probe name of the samples RunAB emits.
const ABName = "ab"

// ABResult is what Apache Bench reports about a run.
type ABResult struct {
	// TimeTaken is "Time taken for tests", in seconds.
	TimeTaken float64
	// Complete is "Complete requests"; Failed is "Failed requests" (connect, receive, length
	// and exceptions); Non2xx is "Non-2xx responses" (0 when ab prints no such line).
	Complete, Failed, Non2xx int64
	// RPS is "Requests per second".
	RPS float64
	// TimePerRequest is the first "Time per request" (mean, ms, as one client sees it).
	TimePerRequest float64
	// HTMLBytes is "HTML transferred" (body bytes); TotalBytes is "Total transferred".
	HTMLBytes, TotalBytes int64
}

// ParseAB parses the report ab prints on its standard output.
func ParseAB(out []byte) (ABResult, error) {
	var r ABResult
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		f := strings.Fields(v)
		if len(f) == 0 || seen[k] {
			continue
		}
		var err error
		switch k {
		case "Time taken for tests":
			r.TimeTaken, err = strconv.ParseFloat(f[0], 64)
		case "Complete requests":
			r.Complete, err = strconv.ParseInt(f[0], 10, 64)
		case "Failed requests":
			r.Failed, err = strconv.ParseInt(f[0], 10, 64)
		case "Non-2xx responses":
			r.Non2xx, err = strconv.ParseInt(f[0], 10, 64)
		case "Requests per second":
			r.RPS, err = strconv.ParseFloat(f[0], 64)
		case "Time per request":
			r.TimePerRequest, err = strconv.ParseFloat(f[0], 64)
		case "HTML transferred":
			r.HTMLBytes, err = strconv.ParseInt(f[0], 10, 64)
		case "Total transferred":
			r.TotalBytes, err = strconv.ParseInt(f[0], 10, 64)
		default:
			continue
		}
		if err != nil {
			return r, fmt.Errorf("parse ab output: %s: %w", k, err)
		}
		seen[k] = true
	}
	for _, k := range []string{"Time taken for tests", "Complete requests", "Failed requests"} {
		if !seen[k] {
			return r, fmt.Errorf("parse ab output: no %q line", k)
		}
	}
	return r, nil
}

// ABArgs returns ab's command line for a run to target.
func ABArgs(t Target, cfg Config) []string {
	cfg = cfg.withDefaults()
	argv := []string{"ab", "-q", "-r", "-n", strconv.Itoa(cfg.Requests), "-c", strconv.Itoa(cfg.Concurrency),
		"-s", strconv.Itoa(max(1, int(cfg.Timeout.Round(time.Second)/time.Second)))}
	if cfg.KeepAlive {
		argv = append(argv, "-k")
	}
	if t.Proxy.IsValid() {
		argv = append(argv, "-X", t.Proxy.String())
	}
	return append(argv, t.URL)
}

// RunAB runs Apache Bench in the chain's source node with the same target and settings as the
// probe, and returns its report as samples of probe "ab" (total_time, rps, errors, non2xx,
// bytes, requests, request_time_mean) labelled like the probe's. ab runs with -r (socket
// receive errors are counted, not fatal); it still gives up after 10 failed connects, and
// then RunAB returns an error with ab's message. The run is bounded by cfg.Deadline.
//
// Equivalent to: ip netns exec SRC ab -q -r -n N -c C -s TIMEOUT [-k] [-X PROXY:PORT] http://ORIGIN:PORT/obj-SIZE
func RunAB(ctx context.Context, env probe.Env, cfg Config) ([]results.Sample, error) {
	cfg = cfg.withDefaults()
	t, err := Resolve(env.Plan, env.Chain, cfg.Object)
	if err != nil {
		return nil, err
	}
	argv := ABArgs(t, cfg)
	what := fmt.Sprintf("run %s in node %s", strings.Join(argv, " "), t.Source)
	src, err := env.Node(t.Source)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Deadline)
	defer cancel()
	out, runErr := src.Output(ctx, nil, argv...)
	r, err := ParseAB(out)
	if err != nil {
		if runErr != nil {
			return nil, runErr
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	via := "direct"
	if t.Proxy.IsValid() {
		via = "proxy"
	}
	labels := map[string]string{"object": t.Object, "concurrency": strconv.Itoa(cfg.Concurrency),
		"keepalive": strconv.FormatBool(cfg.KeepAlive), "via": via}
	return []results.Sample{
		metric.ABTotalTime.Sample(r.TimeTaken, labels),
		metric.ABRPS.Sample(r.RPS, labels),
		metric.ABErrors.Sample(float64(r.Failed), labels),
		metric.ABNon2xx.Sample(float64(r.Non2xx), labels),
		metric.ABBytes.Sample(float64(r.HTMLBytes), labels),
		metric.ABRequests.Sample(float64(r.Complete), labels),
		metric.ABTimePerReq.Sample(r.TimePerRequest, labels),
	}, runErr
}

type abProber struct{ cfg Config }

// NewAB returns Apache Bench as a probe: RunAB with cfg, its samples emitted.
func NewAB(cfg Config) probe.Probe { return abProber{cfg: cfg} }

// Name returns ABName.
func (abProber) Name() string { return ABName }

// Run runs RunAB and emits what it returned, also when it failed part-way.
func (a abProber) Run(ctx context.Context, env probe.Env, emit func(results.Sample)) error {
	samples, err := RunAB(ctx, env, a.cfg)
	for _, x := range samples {
		emit(x)
	}
	return err
}
