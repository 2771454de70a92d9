package echo

import (
	"slices"
	"strconv"
	"time"
)

// Where the path of an echo starts and ends (Config.PathEnd, Result.PathEnd).
const (
	// PathEndTC: at the sender's own interface, tc egress to tc ingress (package tcstamp),
	// the same two kernel points for every attachment driver. The default where the kernel
	// has tcx; elsewhere the run falls back to PathEndSocket and says why.
	PathEndTC = "tc"
	// PathEndSocket: the socket's software TX timestamp to its RX timestamp, which veth,
	// macvlan and a bpf_redirect_peer'd reply each take at a different point.
	PathEndSocket = "socket"
	// PathEndXDP: the sender's interface's XDP hooks (MethodXDP): the generator's stamp as a
	// frame left, the echo program's as it came back.
	PathEndXDP = "xdp"
)

// MaxAttempts bounds Config.Attempts: a chain that loses echoes in twenty runs in a row does
// not lose them by a momentary error, and the trial should say so rather than retry on.
const MaxAttempts = 20

// Packet is one echo: when it was sent and came back, in user space and in the kernel (ns
// since the epoch; 0 = not seen).
type Packet struct {
	Seq uint64
	// Sent is the user-space time just before the send system call.
	Sent int64
	// TXKernel is the kernel's software TX timestamp: the driver handing the echo to the
	// device (for a veth, its transmit routine).
	TXKernel int64
	// RXKernel is the kernel's software RX timestamp of the reply: entering the stack.
	RXKernel int64
	// Recv is the user-space time the reply was read.
	Recv int64
	// TXSched says TXKernel is the device layer's stamp (dev_queue_xmit), because the driver
	// takes none (macvlan): the path then starts a little earlier.
	TXSched bool
	// WireOut and WireIn are the echo's times at the sender's own interface, taken by the tc
	// programs of package tcstamp at its egress and ingress (ns since the epoch; 0 = not seen):
	// the same two kernel points for every driver. Wire says the run had them attached: then
	// the path, and the stack figures either side of it, are taken from them (see Path).
	WireOut, WireIn int64
	Wire            bool
}

// Lost reports whether no reply came back.
func (p Packet) Lost() bool { return p.Recv == 0 }

// Stamped reports whether both ends of the path are known: the tc stamps in a run that had
// them (Wire), else both kernel (socket) timestamps.
func (p Packet) Stamped() bool {
	if p.Wire {
		return p.WireOut != 0 && p.WireIn != 0
	}
	return p.TXKernel != 0 && p.RXKernel != 0
}

// SocketStamped reports whether both socket timestamps are known.
func (p Packet) SocketStamped() bool { return p.TXKernel != 0 && p.RXKernel != 0 }

// RTT is the round trip seen by the application: send call to reply read.
func (p Packet) RTT() time.Duration { return time.Duration(p.Recv - p.Sent) }

// Path is the round trip outside the sender's stack: with tc stamps (Wire), from the echo
// leaving the sender's interface (tc egress) to the reply reaching it (tc ingress), the same
// points for every driver; without, from the socket's TX timestamp to its RX timestamp,
// which each driver takes at its own point (SocketPath).
func (p Packet) Path() time.Duration {
	if p.Wire {
		return time.Duration(p.WireIn - p.WireOut)
	}
	return p.SocketPath()
}

// SocketPath is the socket's TX timestamp to its RX timestamp.
func (p Packet) SocketPath() time.Duration { return time.Duration(p.RXKernel - p.TXKernel) }

// StackTX is the time in the sender's stack on the way out: send call to the path's start.
func (p Packet) StackTX() time.Duration {
	if p.Wire {
		return time.Duration(p.WireOut - p.Sent)
	}
	return time.Duration(p.TXKernel - p.Sent)
}

// StackRX is the time in the sender's stack on the way in: the path's end to reply read.
func (p Packet) StackRX() time.Duration {
	if p.Wire {
		return time.Duration(p.Recv - p.WireIn)
	}
	return time.Duration(p.Recv - p.RXKernel)
}

// PingRTT is the round trip as iputils ping computes it: user time before the send to the
// kernel's RX timestamp of the reply (ping reads SO_TIMESTAMP), i.e. RTT - StackRX.
func (p Packet) PingRTT() time.Duration { return time.Duration(p.RXKernel - p.Sent) }

// Result is one run of the probe.
type Result struct {
	Protocol string
	Size     int
	// Requested is the rate asked for (packets/s, Max for a flood); Achieved is the rate the
	// echoes left at: (Sent-1) / (last send - first send).
	Requested, Achieved float64
	// Sent echoes; Received first replies; Duplicates further copies; Reordered replies that
	// came after the reply of an echo that left later (see reorderedCount); Errors ICMP errors
	// about our echoes.
	Sent, Received, Duplicates, Reordered, Errors int
	// Threads is how many sending threads (each on its own socket) shared the schedule: one up
	// to 50 Kpps and for a flood, more above (see laneCount).
	Threads int
	// TXStamps counts echoes with the driver's TX timestamp, TXSched those with the device
	// layer's in its place; Retries counts sends repeated because the socket buffer was full.
	TXStamps, TXSched, Retries int
	Packets                    []Packet
	// CPU is the CPU time the whole sfclab process used during the run; Wall the run's length.
	CPU, Wall time.Duration
	// CPUUser is the user-space part of CPU.
	CPUUser time.Duration
	// RunID is the id the run's echoes carry (lane i: RunID+i).
	RunID uint32
	// PathEnd says where the path was taken: PathEndTC (the tc stamps at the sender's
	// interface) or PathEndSocket (the socket's timestamps); PathEndNote why not tc, when
	// the tc stamps could not be attached.
	PathEnd, PathEndNote string
}

// Loss is the lost share of sent echoes in percent (100 when nothing was sent).
func (r *Result) Loss() float64 {
	if r.Sent == 0 {
		return 100
	}
	return 100 * float64(r.Sent-r.Received) / float64(r.Sent)
}

// RateReached reports whether the achieved rate is within 1 % of the requested one (always
// true for a flood, which asks for no rate).
func (r *Result) RateReached() bool {
	return r.Requested == Max || r.Achieved >= 0.99*r.Requested
}

// Durations returns f of every echo that came back (and, when stamped, of those with both
// kernel timestamps), in sequence order.
func (r *Result) Durations(f func(Packet) time.Duration, stamped bool) []time.Duration {
	var out []time.Duration
	for _, p := range r.Packets {
		if p.Lost() || (stamped && !p.Stamped()) {
			continue
		}
		out = append(out, f(p))
	}
	return out
}

// Median returns the median of ds (0 for none).
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// RateLabel is how a rate appears in labels: "max" or packets/s.
func RateLabel(rate float64) string {
	if rate == Max {
		return "max"
	}
	return strconv.FormatFloat(rate, 'f', -1, 64)
}

// Complete reports whether every echo sent came back (and something was sent).
func (r *Result) Complete() bool { return r.Sent > 0 && r.Received >= r.Sent }
