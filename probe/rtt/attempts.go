package rtt

import (
	"context"
	"strconv"

	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/rtt/echo"
	"github.com/sfclab/sfclab/results"
)

// Repeating a run until every echo came back: study D sent 1,000 echoes per configuration and
// "if a packet failed, we repeated the experiment until all packets were successfully
// transmitted". Config.Attempts asks for that, bounded: at most Attempts runs, stopping at the
// first run in which every echo sent came back. Every attempt is kept (its samples carry label
// attempt, and final=true on the last one, the run the study would have kept), and a per-run
// sample "attempts" says how many were needed and whether the last one was complete.

// measureAttempts runs measure until a run is Complete or attempts runs were made (at least
// one), and returns every run in order. An error ends the attempts; the runs made so far are
// returned with it.
func measureAttempts(ctx context.Context, attempts int, measure func(context.Context) (*Result, error)) ([]*Result, error) {
	attempts = max(attempts, 1)
	var runs []*Result
	for i := 0; i < attempts; i++ {
		r, err := measure(ctx)
		if r != nil {
			runs = append(runs, r)
		}
		if err != nil {
			return runs, err
		}
		if r == nil || r.Complete() || ctx.Err() != nil {
			break
		}
	}
	return runs, nil
}

// AttemptSamples turns the runs of one repeated measurement into samples: each run's Samples
// with labels attempt (1-based) and final ("true" on the last run only), then "attempts"
// (count of runs, label complete: whether the last run got every echo back) and "attempt_cap"
// (the bound asked for). With attempts <= 1 (no repetition asked) it is Samples of the one
// run, unlabelled, as before the option existed.
func AttemptSamples(attempts int, runs []*Result) []results.Sample {
	if attempts <= 1 {
		if len(runs) == 0 {
			return nil
		}
		return Samples(runs[0])
	}
	var out []results.Sample
	for i, r := range runs {
		for _, s := range Samples(r) {
			s.Labels["attempt"] = strconv.Itoa(i + 1)
			s.Labels["final"] = strconv.FormatBool(i == len(runs)-1)
			out = append(out, s)
		}
	}
	if len(runs) == 0 {
		return out
	}
	last := runs[len(runs)-1]
	labels := map[string]string{"protocol": last.Protocol, "size": strconv.Itoa(last.Size), "rate": echo.RateLabel(last.Requested),
		"complete": strconv.FormatBool(last.Complete())}
	out = append(out, probe.NewSample(Name, "attempts", "count", float64(len(runs)), labels))
	capLabels := map[string]string{"protocol": last.Protocol, "size": strconv.Itoa(last.Size), "rate": echo.RateLabel(last.Requested)}
	out = append(out, probe.NewSample(Name, "attempt_cap", "count", float64(attempts), capLabels))
	return out
}
