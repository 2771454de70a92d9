package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// progress shows a bench's progress: a bar with ETA on a terminal, plain lines otherwise.
type progress struct {
	w     io.Writer
	start time.Time
	p     *mpb.Progress
	bar   *mpb.Bar
	label string
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, start: time.Now()}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// update is the bench.Runner Progress callback.
func (pr *progress) update(done, total int, label string) {
	if isTerminal(pr.w) {
		if pr.p == nil {
			pr.p = mpb.New(mpb.WithOutput(pr.w), mpb.WithWidth(40))
			pr.bar = pr.p.AddBar(int64(total),
				mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return pr.label }, decor.WCSyncSpaceR)),
				mpb.AppendDecorators(decor.CountersNoUnit("%d/%d "), decor.AverageETA(decor.ET_STYLE_GO)))
		}
		pr.label = label
		pr.bar.SetCurrent(int64(done))
		if done == total {
			pr.bar.SetTotal(int64(total), true)
			pr.p.Wait()
		}
		return
	}
	eta := ""
	if done > 0 && done < total {
		per := time.Since(pr.start) / time.Duration(done)
		eta = fmt.Sprintf(", ETA %s", (per * time.Duration(total-done)).Round(time.Second))
	}
	fmt.Fprintf(pr.w, "[%d/%d] %s (elapsed %s%s)\n", done, total, label, time.Since(pr.start).Round(time.Second), eta)
}
