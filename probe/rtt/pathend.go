package rtt

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/rtt/echo"
	"github.com/sfclab/sfclab/probe/rtt/tcstamp"
	"github.com/sfclab/sfclab/results"
)

// measurePathEnd is echo.Measure with the path's end points of cfg.PathEnd: the tc stamps attached
// to the sender's interface towards dst (in src's namespace) for the run and detached before
// it returns, on every path out; without tcx, PathEnd "" falls back to the socket's stamps
// (Result.PathEndNote says why) and PathEnd "tc" fails.
func measurePathEnd(ctx context.Context, src Doer, dst netip.AddrPort, cfg Config) (*Result, error) {
	if cfg.PathEnd == echo.PathEndSocket {
		r, err := echo.Measure(ctx, src, dst, cfg)
		if r != nil {
			r.PathEnd = echo.PathEndSocket
		}
		return r, err
	}
	var st *tcstamp.Stamps
	aerr := src.Do(func() error {
		idx, name, err := tcstamp.Route(dst.Addr())
		if err != nil {
			return err
		}
		st, err = tcstamp.Attach(idx, name, cfg.WithDefaults().Port)
		return err
	})
	if aerr != nil {
		if cfg.PathEnd == echo.PathEndTC {
			return nil, fmt.Errorf("measure rtt to %s with path_end tc: %w", dst, aerr)
		}
		r, err := echo.Measure(ctx, src, dst, cfg)
		if r != nil {
			r.PathEnd, r.PathEndNote = echo.PathEndSocket, aerr.Error()
		}
		return r, err
	}
	defer st.Close()
	r, err := echo.Measure(ctx, src, dst, cfg)
	if r == nil {
		return r, err
	}
	if rerr := applyWire(r, st); rerr != nil {
		r.PathEnd, r.PathEndNote = echo.PathEndSocket, rerr.Error()
		return r, err
	}
	return r, err
}

// applyWire puts the tc stamps of the run's echoes into r's packets.
func applyWire(r *Result, st *tcstamp.Stamps) error {
	n := 0
	for _, p := range r.Packets {
		n = max(n, int(p.Seq)+1)
	}
	stamps, err := st.Read(n)
	if err != nil {
		return err
	}
	lanes := uint32(max(r.Threads, 1))
	for i := range r.Packets {
		p := &r.Packets[i]
		p.Wire = true
		if s := stamps[p.Seq]; s.Out != 0 && s.ID-r.RunID < lanes {
			p.WireOut, p.WireIn = s.Out, s.In
		}
	}
	r.PathEnd = echo.PathEndTC
	return nil
}

// pathEndSamples says where the run's path started and ended: "path_end" (count of echoes
// with the path, label end tc or socket, and note: why not tc), and with tc stamps
// "socket_tx_offset" and "socket_rx_offset" (ms, medians over echoes with both kinds of
// stamps): where the socket's TX and RX timestamps fall relative to the tc points for this
// driver (negative RX: the reply was stamped before it reached the sender's interface).
func pathEndSamples(r *Result, with func(kv ...string) map[string]string) []results.Sample {
	end := r.PathEnd
	if end == "" {
		end = echo.PathEndSocket
	}
	n := 0
	var tx, rx []time.Duration
	for _, p := range r.Packets {
		if p.Lost() {
			continue
		}
		if p.Stamped() {
			n++
		}
		if p.Wire && p.WireOut != 0 && p.WireIn != 0 && p.SocketStamped() {
			tx = append(tx, time.Duration(p.TXKernel-p.WireOut))
			rx = append(rx, time.Duration(p.RXKernel-p.WireIn))
		}
	}
	labels := with("end", end)
	if r.PathEndNote != "" {
		labels["note"] = r.PathEndNote
	}
	out := []results.Sample{probe.NewSample(Name, "path_end", "count", float64(n), labels)}
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	if len(rx) > 0 {
		slices.Sort(tx)
		slices.Sort(rx)
		out = append(out,
			probe.NewSample(Name, "socket_tx_offset", "ms", ms(echo.Median(tx)), with("end", end)),
			probe.NewSample(Name, "socket_rx_offset", "ms", ms(echo.Median(rx)), with("end", end)))
	}
	return out
}
