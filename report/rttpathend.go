package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Where the rtt probe timed an echo's path (the probe's path_end samples).
const (
	// PathEndTC: the sender's interface, tc egress to tc ingress.
	PathEndTC = "tc"
	// PathEndSocket: the socket's software TX and RX timestamps.
	PathEndSocket = "socket"
	// PathEndXDP: the sender's interface at its XDP hooks, the generator's stamp as a frame
	// left and the echo program's as it came back (the rtt probe's xdp method).
	PathEndXDP = "xdp"
)

// xdpEndText says how the xdp method's cells are timed.
const xdpEndText = "Cells sent by the XDP generator (method xdp: %s) are timed at the sender's interface too, at its XDP hooks: the generator's stamp as a frame left (before any qdisc) and the echo program's as it came back (before tc ingress), a timestamp in every n-th frame."

// pathEnd is the cell's path end over its runs: one name, "tc and socket" when runs differ, ""
// when no run recorded one.
func (d *rttData) pathEnd() string {
	var ends []string
	for e := range d.ends {
		ends = append(ends, e)
	}
	slices.Sort(ends)
	return strings.Join(ends, " and ")
}

// pathEndBlocks says where the paths of this run were timed, and, with tc stamps, where the
// socket's timestamps fell against those points per cell (the evidence that they differ per
// driver).
func (r *Report) pathEndBlocks() []block {
	var socket, bases []string
	tx, rx := map[string][]float64{}, map[string][]float64{}
	var xdp []string
	for _, row := range r.RTT {
		if row.PathEnd == PathEndXDP {
			xdp = append(xdp, row.Scenario+" at "+row.Rate)
			continue
		}
		if row.PathEnd != PathEndTC {
			socket = append(socket, row.Scenario+" at "+row.Rate)
		}
		if !math.IsNaN(row.SocketRX) {
			b := baseOf(row.Scenario)
			if _, ok := rx[b]; !ok {
				bases = append(bases, b)
			}
			tx[b], rx[b] = append(tx[b], row.SocketTX), append(rx[b], row.SocketRX)
		}
	}
	offsets := &table{id: "rtt-socket-stamps", header: []string{"scenario", "cells", "socket TX stamp − tc egress", "socket RX stamp − tc ingress"},
		right: []bool{false, true, true, true}}
	for _, b := range bases {
		offsets.rows = append(offsets.rows, []string{b, strconv.Itoa(len(rx[b])), usText(median(tx[b])), usText(median(rx[b]))})
	}
	var out []block
	switch {
	case len(r.RTT) == 0:
		return nil
	case len(xdp) == len(r.RTT):
	case len(socket) == 0 && len(xdp) > 0:
		out = append(out, block{para: "Path end in this run: the tc points at the sender's interface in every cell the socket path sent."})
	case len(socket) == 0:
		out = append(out, block{para: "Path end in this run: the tc points at the sender's interface in every cell."})
	case len(socket) == len(r.RTT):
		out = append(out, block{para: "Path end in this run: the socket's timestamps in every cell (the tc programs could not be attached, the run asked for path_end: socket, or it was recorded before the tc stamps). " +
			"Each driver takes those at its own point: comparisons between drivers may be biased by where the stamp lands."})
	case len(socket) == len(r.RTT)-len(xdp):
		out = append(out, block{para: "Path end in this run: the socket's timestamps in every cell the socket path sent (the tc programs could not be attached, the run asked for path_end: socket, or it was recorded before the tc stamps). " +
			"Each driver takes those at its own point: comparisons between drivers may be biased by where the stamp lands."})
	default:
		out = append(out, block{para: "Path end in this run: the tc points at the sender's interface, except in " + strings.Join(socket, ", ") +
			", timed by the socket's timestamps, which each driver takes at its own point."})
	}
	if len(xdp) > 0 {
		out = append(out, block{para: fmt.Sprintf(xdpEndText, strings.Join(xdp, ", "))})
	}
	if len(offsets.rows) > 0 {
		out = append(out, block{para: "Where the socket's software timestamps fell against the tc points, per scenario (median over its cells and rates of each run's median; negative RX: the reply was stamped before it reached the sender's interface, so a path between socket stamps would end earlier):"},
			block{table: offsets})
	}
	return out
}

// pathEndText is the verdict's line on where the path RTT starts and ends.
func (r *Report) pathEndText() string {
	tc, other := 0, 0
	for _, row := range r.RTT {
		if row.PathEnd == PathEndTC || row.PathEnd == PathEndXDP {
			tc++
		} else {
			other++
		}
	}
	switch {
	case tc+other == 0:
		return ""
	case other == 0:
		return "Path RTT: from the echo leaving the sender's interface (tc egress) to the reply reaching it (tc ingress), the same two points for every driver."
	case tc == 0:
		return "Path RTT: between the socket's timestamps, which each driver takes at its own point (no tc stamps in this run): driver comparisons may be biased by where the stamp lands."
	}
	return fmt.Sprintf("Path RTT: from the sender's interface (tc egress) to it again (tc ingress) in %s, between the socket's timestamps (taken at a different point per driver) in %d.", plural2(tc, "cell"), other)
}
