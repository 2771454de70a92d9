package telemetry

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes the rates as `sfclab top` shows them on a terminal: per lab a table of its
// nodes, busiest first, the bottleneck candidate marked.
func WriteTable(w io.Writer, labs []LabRate, now time.Time, every time.Duration) error {
	fmt.Fprintf(w, "sfclab top   %s   every %s   q or Ctrl-C quits\n", now.UTC().Format("15:04:05"), every)
	if len(labs) == 0 {
		fmt.Fprintln(w, "\nno labs deployed")
	}
	for _, l := range labs {
		fmt.Fprintf(w, "\nlab %s (%s)\n", l.Lab, l.Status)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tKIND\tRX\tTX\tRX pkt/s\tDROPS/s\tCPU\t")
		for _, n := range l.Nodes {
			var marks []string
			if n.Bottleneck != "" {
				marks = append(marks, "<- bottleneck? ("+n.Bottleneck+")")
			}
			if n.Emulated {
				marks = append(marks, "CPU: "+CPUMark)
			}
			if n.Down != "" {
				marks = []string{"down: " + n.Down}
			}
			mark := strings.Join(marks, "; ")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Node, n.Kind, bits(n.RxBps), bits(n.TxBps),
				count(n.RxPps), count(n.Drops), cpu(n.CPU), mark)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// WriteLines writes the rates as plain lines, one per node, for a pipe or a log:
//
//	TIME LAB NODE rx_bps=… tx_bps=… rx_pps=… drops_ps=… cpu=… [cpu_mark="emulated CPU (TCG): not comparable"] [bottleneck=cpu]
func WriteLines(w io.Writer, labs []LabRate, now time.Time) error {
	ts := now.UTC().Format(time.RFC3339)
	var b strings.Builder
	for _, l := range labs {
		for _, n := range l.Nodes {
			fmt.Fprintf(&b, "%s lab=%s node=%s rx_bps=%.0f tx_bps=%.0f rx_pps=%.0f drops_ps=%.0f cpu=%s", ts, l.Lab, n.Node,
				n.RxBps, n.TxBps, n.RxPps, n.Drops, cpuPlain(n.CPU))
			if n.Emulated {
				fmt.Fprintf(&b, " cpu_mark=%q", CPUMark)
			}
			if n.Bottleneck != "" {
				fmt.Fprintf(&b, " bottleneck=%s", n.Bottleneck)
			}
			if n.Down != "" {
				b.WriteString(" down=1")
			}
			b.WriteByte('\n')
		}
	}
	if len(labs) == 0 {
		fmt.Fprintf(&b, "%s no labs deployed\n", ts)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func bits(bps float64) string {
	units := []string{"bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"}
	i := 0
	for bps >= 1000 && i < len(units)-1 {
		bps /= 1000
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f %s", bps, units[i])
	}
	return fmt.Sprintf("%.2f %s", bps, units[i])
}

func count(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func cpu(cores float64) string {
	if cores < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f %%", cores*100)
}

func cpuPlain(cores float64) string {
	if cores < 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", cores)
}
