package sfcclient

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/sfclab/sfclab/stats"
)

// DeployTime configures study C's deploy-time experiment: chains of 1..len(Functions)
// functions, each deployed in the four steps and removed again, Repetitions times.
type DeployTime struct {
	Lab                 string
	Source, Destination string
	// Functions are the function nodes in chain order; a chain of n uses the first n.
	Functions   []string
	MatchFields map[string]any
	Repetitions int
	// Progress, when set, is called after each deployed chain.
	Progress func(rep, length int, d *Deployed)
	// FirstPacket, when set, measures the time from the port chain's 201 (d.ChainAnswered)
	// until the first packet of the classified flow has crossed the new chain, recorded as
	// step "first_packet", and from the port chain request's start ("first_packet_pc": the
	// PC step's time plus that). It needs a data plane that steers.
	FirstPacket func(ctx context.Context, d *Deployed) (time.Duration, error)
}

// Sample is one measured step.
type Sample struct {
	Repetition int
	Length     int
	Step       string // FC, PP, PPG, PC or total
	Seconds    float64
}

// Run measures: per repetition, every chain length in turn (so drift spreads over all
// lengths), each step's time at the client over HTTP. Every chain is removed before the next.
func (e *DeployTime) Run(ctx context.Context, c *Client) ([]Sample, error) {
	if len(e.Functions) == 0 || e.Repetitions < 1 {
		return nil, fmt.Errorf("deploy-time experiment: need functions and at least one repetition")
	}
	var out []Sample
	for rep := 1; rep <= e.Repetitions; rep++ {
		for n := 1; n <= len(e.Functions); n++ {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			f := &ChainFile{Source: e.Source, Destination: e.Destination, MatchFields: e.MatchFields, Lab: e.Lab}
			for _, fn := range e.Functions[:n] {
				f.Chain = append(f.Chain, Element{Name: fn, Direction: DirOut})
			}
			d, err := c.Apply(ctx, f, fmt.Sprintf("dt-r%d-n%d", rep, n))
			if err != nil {
				return out, fmt.Errorf("repetition %d, %d functions: %w", rep, n, err)
			}
			for i, s := range Steps {
				out = append(out, Sample{rep, n, s, d.Times[i].Seconds()})
			}
			out = append(out, Sample{rep, n, "total", d.Total().Seconds()})
			if e.FirstPacket != nil {
				t, err := e.FirstPacket(ctx, d)
				if err != nil {
					_ = c.Remove(context.WithoutCancel(ctx), d)
					return out, fmt.Errorf("repetition %d, %d functions: first packet: %w", rep, n, err)
				}
				out = append(out, Sample{rep, n, "first_packet", t.Seconds()},
					Sample{rep, n, "first_packet_pc", (d.Times[3] + t).Seconds()})
			}
			if e.Progress != nil {
				e.Progress(rep, n, d)
			}
			if err := c.Remove(ctx, d); err != nil {
				return out, fmt.Errorf("repetition %d, %d functions: %w", rep, n, err)
			}
		}
	}
	return out, nil
}

// PublishedSlope is study C's published growth of the deploy time: about 0.5 s per added
// function (text of section V; Fig. 5's bars are not given as numbers).
const PublishedSlope = 0.5

// Table writes the measured deploy times as Markdown: per chain length, each step's mean and
// 95 % CI in milliseconds, then the total's growth per function (least squares) beside the
// published one.
func Table(w io.Writer, samples []Sample) error { return TableMarked(w, samples, "") }

// TableMarked is Table with mark (when not "") in the header of each first-packet column: a
// run whose functions were guests under TCG marks what crossed them ("emulated CPU (TCG): not
// comparable"), while the REST steps, which enter no guest, stay unmarked.
func TableMarked(w io.Writer, samples []Sample, mark string) error {
	by := map[int]map[string][]float64{}
	maxN := 0
	for _, s := range samples {
		if by[s.Length] == nil {
			by[s.Length] = map[string][]float64{}
		}
		by[s.Length][s.Step] = append(by[s.Length][s.Step], s.Seconds)
		maxN = max(maxN, s.Length)
	}
	steps := append(append([]string{}, Steps...), "total")
	header, rule := "| functions | n | FC | PP | PPG | PC | total |", "|---:|---:|---:|---:|---:|---:|---:|"
	if by[1] != nil && by[1]["first_packet"] != nil {
		steps = append(steps, "first_packet", "first_packet_pc")
		suffix := ""
		if mark != "" {
			suffix = " (" + mark + ")"
		}
		header, rule = header+" first packet after the PC answer"+suffix+" | first packet after the PC request"+suffix+" |", rule+"---:|---:|"
	}
	fmt.Fprintln(w, "Deploy time per REST step at the client, ms (mean ± 95 % CI)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, rule)
	var xs, ys, pcs []float64
	for n := 1; n <= maxN; n++ {
		row := by[n]
		if row == nil {
			continue
		}
		fmt.Fprintf(w, "| %d | %d |", n, len(row["total"]))
		for _, st := range steps {
			s := stats.Summarize(row[st])
			fmt.Fprintf(w, " %s |", msCI(s))
		}
		fmt.Fprintln(w)
		for _, v := range row["total"] {
			xs, ys = append(xs, float64(n)), append(ys, v)
		}
		for _, v := range row["PC"] {
			pcs = append(pcs, v/float64(n))
		}
	}
	fmt.Fprintln(w)
	slope := slopeOf(xs, ys)
	fmt.Fprintln(w, "| growth of the total per added function | measured here | study C (published) |")
	fmt.Fprintln(w, "|---|---:|---:|")
	fmt.Fprintf(w, "| seconds per function | %.6f | ≈ %.1f |\n", slope, PublishedSlope)
	fmt.Fprintf(w, "| port-chain step per function, ms (mean) | %.3f | — |\n", stats.Summarize(pcs).Mean*1000)
	return nil
}

func msCI(s stats.Summary) string {
	if s.N == 0 {
		return "—"
	}
	if math.IsNaN(s.CI95Half) {
		return fmt.Sprintf("%.3f", s.Mean*1000)
	}
	return fmt.Sprintf("%.3f ± %.3f", s.Mean*1000, s.CI95Half*1000)
}

// slopeOf is the least-squares slope of y over x.
func slopeOf(x, y []float64) float64 {
	if len(x) < 2 {
		return math.NaN()
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= float64(len(x))
	my /= float64(len(y))
	var num, den float64
	for i := range x {
		num += (x[i] - mx) * (y[i] - my)
		den += (x[i] - mx) * (x[i] - mx)
	}
	if den == 0 {
		return math.NaN()
	}
	return num / den
}

// CSV writes the samples as CSV (repetition, functions, step, seconds).
func CSV(w io.Writer, samples []Sample) error {
	if _, err := fmt.Fprintln(w, "repetition,functions,step,seconds"); err != nil {
		return err
	}
	for _, s := range samples {
		if _, err := fmt.Fprintf(w, "%d,%d,%s,%.9f\n", s.Repetition, s.Length, s.Step, s.Seconds); err != nil {
			return err
		}
	}
	return nil
}

// CompareTable writes, per chain length and REST step, the mean time of two runs of the
// same experiment side by side, sfclab's (ours) and another server's (theirs, e.g. the real
// networking-sfc server), and their ratio theirs/ours. Steps without samples in either run
// are left out.
func CompareTable(w io.Writer, ours, theirs []Sample, oursName, theirsName string) error {
	mean := func(samples []Sample) map[int]map[string]stats.Summary {
		by := map[int]map[string][]float64{}
		for _, s := range samples {
			if by[s.Length] == nil {
				by[s.Length] = map[string][]float64{}
			}
			by[s.Length][s.Step] = append(by[s.Length][s.Step], s.Seconds)
		}
		out := map[int]map[string]stats.Summary{}
		for n, steps := range by {
			out[n] = map[string]stats.Summary{}
			for st, v := range steps {
				out[n][st] = stats.Summarize(v)
			}
		}
		return out
	}
	a, b := mean(ours), mean(theirs)
	maxN := 0
	for n := range a {
		maxN = max(maxN, n)
	}
	fmt.Fprintf(w, "| functions | step | %s, ms | %s, ms | ratio %s / %s |\n", oursName, theirsName, theirsName, oursName)
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|")
	for n := 1; n <= maxN; n++ {
		for _, st := range append(append([]string{}, Steps...), "total") {
			x, okA := a[n][st]
			y, okB := b[n][st]
			if !okA || !okB || x.N == 0 || y.N == 0 {
				continue
			}
			ratio := "—"
			if x.Mean > 0 {
				ratio = fmt.Sprintf("%.1f", y.Mean/x.Mean)
			}
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s |\n", n, st, msCI(x), msCI(y), ratio)
		}
	}
	return nil
}
