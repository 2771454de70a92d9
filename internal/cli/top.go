package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/telemetry"
)

func newTop() *cobra.Command {
	var every time.Duration
	var count int
	cmd := &cobra.Command{
		Use:   "top [LAB]",
		Short: "Live view of every node's traffic, drops and CPU, busiest first, the bottleneck candidate marked",
		Long: `Shows, refreshed every second, each node's receive and transmit rate, drops and CPU of one lab
(or of every lab), busiest node first; the node dropping most packets, or else the busy function
using the most CPU, is marked as the bottleneck candidate, never from an idle reading (no node
at 100 packets/s: docs/telemetry.md). A VM under TCG has its CPU marked "emulated CPU (TCG): not
comparable". q or Ctrl-C quits. When standard output is not a terminal, prints one plain line per
node and interval instead.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if every < 100*time.Millisecond {
				return fmt.Errorf("interval %s is too short: give --interval 100ms or more", every)
			}
			if err := deploy.CheckRoot(); err != nil {
				return err
			}
			r := &telemetry.Reader{Source: telemetry.FromDeployer(deploy.New())}
			if len(args) == 1 {
				if _, err := r.Lab(cmd.Context(), args[0]); err != nil {
					return fmt.Errorf("top %s: %w (list labs with: sfclab inspect)", args[0], err)
				}
			}
			out := cmd.OutOrStdout()
			f, isFile := out.(*os.File)
			if isFile && isatty.IsTerminal(f.Fd()) {
				return topScreen(cmd.Context(), r, args, f, every, count)
			}
			return topLines(cmd.Context(), r, args, out, every, count)
		},
	}
	cmd.Flags().DurationVar(&every, "interval", time.Second, "refresh interval")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many refreshes (0: until q or Ctrl-C)")
	return cmd
}

// topLoop calls show with the rates of every interval until ctx ends, quit closes or count
// refreshes are done.
func topLoop(ctx context.Context, r *telemetry.Reader, labs []string, every time.Duration, count int,
	quit <-chan struct{}, show func([]telemetry.LabRate, time.Time) error) error {
	prev, err := r.Snapshot(ctx, labs...)
	if err != nil {
		return err
	}
	t0 := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; count == 0 || i < count; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-quit:
			return nil
		case <-tick.C:
		}
		cur, err := r.Snapshot(ctx, labs...)
		if err != nil {
			return err
		}
		now := time.Now()
		if err := show(telemetry.Rates(prev, cur, now.Sub(t0)), now); err != nil {
			return err
		}
		prev, t0 = cur, now
	}
	return nil
}

func topLines(ctx context.Context, r *telemetry.Reader, labs []string, out io.Writer, every time.Duration, count int) error {
	return topLoop(ctx, r, labs, every, count, nil, func(rates []telemetry.LabRate, now time.Time) error {
		return telemetry.WriteLines(out, rates, now)
	})
}

// Terminal control sequences: alternate screen, cursor, home, erase.
const (
	enterScreen = "\x1b[?1049h\x1b[?25l"
	leaveScreen = "\x1b[?25h\x1b[?1049l"
	home        = "\x1b[H"
	eraseLine   = "\x1b[K"
	eraseBelow  = "\x1b[J"
)

// topScreen redraws the table in the terminal's alternate screen; q quits. The terminal's
// settings are restored however the loop ends.
func topScreen(ctx context.Context, r *telemetry.Reader, labs []string, out *os.File, every time.Duration, count int) error {
	quit := make(chan struct{})
	if restore, err := cbreak(int(os.Stdin.Fd())); err == nil {
		defer restore()
		go func() {
			b := make([]byte, 1)
			for {
				n, err := os.Stdin.Read(b)
				if err != nil || (n == 1 && (b[0] == 'q' || b[0] == 'Q' || b[0] == 3)) {
					close(quit)
					return
				}
			}
		}()
	}
	fmt.Fprint(out, enterScreen+home+eraseBelow+"sfclab top: measuring the first interval...")
	defer fmt.Fprint(out, leaveScreen)
	var buf bytes.Buffer
	return topLoop(ctx, r, labs, every, count, quit, func(rates []telemetry.LabRate, now time.Time) error {
		buf.Reset()
		if err := telemetry.WriteTable(&buf, rates, now, every); err != nil {
			return err
		}
		frame := bytes.ReplaceAll(buf.Bytes(), []byte("\n"), []byte(eraseLine+"\r\n"))
		_, err := out.Write(append(append([]byte(home), frame...), eraseBelow...))
		return err
	})
}

// cbreak turns off line buffering and echo on a terminal (signals still work, so Ctrl-C
// interrupts) and returns the function that restores its settings.
//
// Equivalent to: stty -icanon -echo
func cbreak(fd int) (restore func(), err error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("read terminal settings: %w", err)
	}
	raw := *old
	raw.Lflag &^= unix.ICANON | unix.ECHO
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, fmt.Errorf("set terminal settings: %w", err)
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}
