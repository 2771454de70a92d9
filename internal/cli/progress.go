package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
)

// progress shows a bench's progress: on a terminal one line redrawn in place with a bar and
// the ETA, otherwise one plain line per step (logs and CI keep every line).
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time
	now   func() time.Time
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, tty: isTerminal(w), start: time.Now(), now: time.Now}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// update is the bench.Runner Progress callback.
func (pr *progress) update(done, total int, label string) {
	elapsed := pr.now().Sub(pr.start)
	eta := ""
	if done > 0 && done < total {
		per := elapsed / time.Duration(done)
		eta = fmt.Sprintf(", ETA %s", (per * time.Duration(total-done)).Round(time.Second))
	}
	if !pr.tty {
		fmt.Fprintf(pr.w, "[%d/%d] %s (elapsed %s%s)\n", done, total, label, elapsed.Round(time.Second), eta)
		return
	}
	const width = 30
	filled := 0
	if total > 0 {
		filled = done * width / total
	}
	bar := strings.Repeat("#", filled) + strings.Repeat("-", width-filled)
	// \r and erase-line redraw the same line; the last step ends it.
	fmt.Fprintf(pr.w, "\r\033[K[%s] %d/%d %s (elapsed %s%s)", bar, done, total, label, elapsed.Round(time.Second), eta)
	if done >= total {
		fmt.Fprintln(pr.w)
	}
}
