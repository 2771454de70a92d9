package ndr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sfclab/sfclab/pktgen"
	"github.com/sfclab/sfclab/probe"
)

// Generators a search may use, fastest first. "auto" takes the first that works here and says
// why it passed over the others.
const (
	// GenXDP is pktgen's XDP live-frame generator, counted by an XDP program at the
	// receiver: the only method measured here that offers more than a veth chain takes from
	// one core (3.5-5.5 Mpps of 64 B frames over a direct veth pair, docs/packet-rate.md).
	GenXDP = "xdp"
	// GenSendmmsg is the socket path: paced sendmmsg(2), counted by recvmmsg(2).
	GenSendmmsg = "sendmmsg"
	// GenAuto tries GenXDP, then GenSendmmsg.
	GenAuto = "auto"
)

// The search's generator never bursts a backlog (pktgen's schedule). A sender held off its
// CPU by other work (8.5 ms at 30 kpps: 256 frames) used to send all it owed in one call,
// which overflowed the 256-frame ring of the forwarder's veth whenever the chain's receiving
// side runs on the other CPU (as place puts it): 1-38 of 60,000 frames lost at 30 kpps, so
// the search reported 18-24 kpps as the one-forwarder chain's drop point. With these caps
// none were lost (docs/packet-rate.md). A call carries at most MaxBurst frames (an eighth of
// the ring; more at high rates, 200 µs of frames), and frames owed for longer than MaxLag
// (and beyond MaxBurst of them) are skipped, not sent: the trial's offered rate counts only
// what was sent, and the skipped frames are reported with each trial.
const (
	MaxBurst = 32
	MaxLag   = 250 * time.Microsecond
)

// SenderPriority is the SCHED_FIFO priority of the placed sender for the length of each trial
// (pktgen's Generator.RealTime), below the NAPI threads' 50 (which run on the other CPU).
// At normal priority, on a shared host, the sender on CPU 0 was off its CPU for up to 80 ms
// and skipped a third to half of its frames at 30 kpps, so every paced trial of the
// one-forwarder search fell short (docs/packet-rate.md). While a trial runs it takes CPU 0
// from the host's other normal-priority tasks, except for the kernel's reserve for them.
const SenderPriority = 40

// CallPeriod is the generator's call period (pktgen's Generator.CallPeriod): a call carries
// 1 ms of frames (at most 128) instead of 50 µs, so that the kernel's per-call page pools do
// not pile up while the placed chain still holds their frames on the other CPU.
const CallPeriod = time.Millisecond

// ShortRepeats is how often a trial whose XDP generator fell short of its request by more
// than the shortfall (2 %) is run again before the search stops with "generator short"
// (Search.ShortRepeats).
const ShortRepeats = 2

// DisturbedRepeats is how often a trial that lost frames while the chain's receiving side was
// held off its CPU by another task (Outcome.Disturbed) is run again before its loss counts
// (Search.DisturbedRepeats). On a PREEMPT_NONE kernel the forwarder's real-time NAPI threads
// wait for other jobs' kernel code: up to 11 ms behind compilers here, while its veth ring
// fills in 1.3 ms at 200 kpps; every trial that lost frames had such a wait, and none of those
// without one lost (docs/packet-rate.md).
const DisturbedRepeats = 3

// ringFrames is a veth's receive ring (VETH_RING_SIZE): a trial is Disturbed when its
// receiving side waited for its CPU longer than the rate takes to fill half of it (the other
// half is the generator's call, callFrames).
const ringFrames = 256

// xdpGen is the XDP generator set up on one chain: the generator in the source node, a
// counter on every interface of the destination node.
type xdpGen struct {
	src, next, dst probe.Node
	gen            *pktgen.Generator
	far            *pktgen.Far
	// pass is sfc_pass on the next node's veths when that node is not the destination.
	pass *pktgen.Far
	// peers is sfc_pass on the peer of the sender's veth where it had no XDP program.
	peers *pktgen.Far
	// cpu is the CPU the sender is pinned to (-1: not pinned); placement says where the
	// chain's receiving side runs, or why it could not be moved off the sender's CPU.
	cpu       int
	placement string
	// rcvCPU is the CPU the next node's receive processing was moved to (-1: not moved).
	rcvCPU int
	// rtErr is why the sender could not run at real-time priority ("" when it could or was
	// not asked to).
	rtErr string
	// stall watches the next node's NAPI threads (nil when not placed, or when it could not
	// run: stallErr says why).
	stall    *pktgen.StallWatch
	stallErr string
}

// newXDPGen sets the generator up, placed (see place) when placed; an error wraps pktgen.ErrUnsupported or says what is
// missing, and the caller falls back to the socket path with it as the reason.
func newXDPGen(ctx context.Context, src, next, dst probe.Node, sfd int, target netip.AddrPort, port uint16, frames []int, placed bool) (_ *xdpGen, err error) {
	for _, f := range frames {
		if f > pktgen.MaxFrame {
			return nil, fmt.Errorf("frame size %d above %d bytes (one page per frame)", f, pktgen.MaxFrame)
		}
	}
	x := &xdpGen{src: src, next: next, dst: dst, cpu: -1, rcvCPU: -1}
	defer func() {
		if err != nil {
			x.Close()
		}
	}()
	var flow pktgen.Flow
	var ifindex int
	var qdisc string
	if err := src.Do(func() (err error) {
		if flow, ifindex, err = pktgen.FlowFrom(sfd, target); err != nil {
			return err
		}
		qdisc, err = pktgen.BypassedQdisc(ifindex)
		return err
	}); err != nil {
		return nil, err
	}
	if qdisc != "" {
		// Live frames leave below the qdisc layer: the shaper would never see them, and the
		// search would measure an unshaped link. The socket sender goes through it.
		return nil, fmt.Errorf("the source's interface is shaped by qdisc %s, which the XDP generator's frames bypass (XDP_TX leaves below the qdisc layer)", qdisc)
	}
	if err := dst.Do(func() error {
		idx, err := pktgen.InterfaceIndexes(false)
		if err != nil {
			return err
		}
		x.far, err = pktgen.NewFar(idx, port, pktgen.Count)
		return err
	}); err != nil {
		return nil, err
	}
	if next != dst {
		// Live-frame transmission into a veth needs a NAPI instance there.
		if err := next.Do(func() error {
			idx, err := pktgen.InterfaceIndexes(true)
			if err != nil {
				return err
			}
			if len(idx) == 0 {
				return errors.New("the chain's first hop has no veth: live-frame transmission into it is not possible")
			}
			x.pass, err = pktgen.NewFar(idx, port, pktgen.Pass)
			return err
		}); err != nil {
			return nil, err
		}
	}
	if err := src.Do(func() (err error) { x.gen, err = pktgen.NewGenerator(ifindex, flow, frames, 0); return err }); err != nil {
		return nil, err
	}
	x.gen.MaxBurst, x.gen.MaxLag, x.gen.CallPeriod = MaxBurst, MaxLag, CallPeriod
	// The sender's veth's peer needs a NAPI instance too when it is not in the next node
	// (a node on a bridge: its peer is in the host's namespace).
	if err := src.Do(func() (err error) { x.peers, err = pktgen.PassPeers([]int{ifindex}, port); return err }); err != nil {
		return nil, err
	}
	x.placement = "not placed (asked not to)"
	if placed {
		x.placement = x.place(ctx, next)
	}
	return x, nil
}

// place pins the sender to CPU 0 and moves the receive processing of the next node's
// interfaces to kernel threads (threaded NAPI) pinned to CPU 1, so that the chain's receiving
// side does not run on the sender's CPU (on one core, veth runs the receiver's work on the
// sender's CPU: the generator then only sends as fast as the chain absorbs and never sees a
// drop). The threads run at real-time priority (SCHED_FIFO 50): on a shared machine a
// sleeping NAPI thread woken behind other tasks lets the veth's 256-frame ring overflow
// already at 60 kpps (3 % lost here at normal priority, none at real-time). It says what it
// did, or why not.
func (x *xdpGen) place(ctx context.Context, next probe.Node) string {
	if runtime.NumCPU() < 2 {
		return "sender and receiving side share the only CPU"
	}
	x.cpu = 0
	var names []string
	if err := next.Do(func() error {
		links, err := pktgen.Interfaces()
		for _, l := range links {
			if l.Type() == "veth" {
				names = append(names, l.Attrs().Name)
			}
		}
		return err
	}); err != nil || len(names) == 0 {
		return fmt.Sprintf("sender on CPU 0; receiving side not moved: no veth in the next node (%v)", err)
	}
	// The veths have an XDP program (counter or sfc_pass), hence a NAPI instance each. sysfs
	// shows the interfaces of the namespace that mounted it: mounted afresh in a private mount
	// namespace, as `ip netns exec` does.
	script := "set -e; mount -t sysfs sysfs /sys; for d in " + strings.Join(names, " ") + "; do " +
		"echo 1 > /sys/class/net/$d/threaded; " +
		"for p in $(pgrep -x \"napi/$d-[0-9]*\"); do taskset -pc 1 $p >/dev/null; chrt -f -p 50 $p; echo napi $p; done; done"
	script = "unshare -m sh -c '" + script + "'"
	out, err := next.Output(ctx, nil, "sh", "-c", script)
	if err != nil {
		return fmt.Sprintf("sender on CPU 0; receiving side not moved to CPU 1: %v %s", err, strings.TrimSpace(string(out)))
	}
	x.rcvCPU = 1
	var tids []int
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "napi" {
			if tid, err := strconv.Atoi(f[1]); err == nil {
				tids = append(tids, tid)
			}
		}
	}
	if x.stall, err = pktgen.NewStallWatch(tids); err != nil {
		x.stallErr = err.Error()
	}
	x.gen.RealTime = SenderPriority
	return "sender on CPU 0 (SCHED_FIFO " + strconv.Itoa(SenderPriority) + " during trials), next node's receive processing (threaded NAPI on " +
		strings.Join(names, ", ") + ", SCHED_FIFO 50) on CPU 1"
}

// trial sends one trial and counts it at the receiver.
func (x *xdpGen) trial(id uint32, pps float64, d, drain time.Duration) (Outcome, error) {
	var sent, refused0, refused1 uint64
	var took time.Duration
	watch := x.stall != nil && pps > 0
	if watch {
		if err := x.stall.Reset(time.Duration(ringFrames / 2 / pps * float64(time.Second))); err != nil {
			return Outcome{}, err
		}
	}
	if err := x.src.Do(func() (err error) {
		if refused0, err = x.gen.Refused(); err != nil {
			return err
		}
		if sent, took, err = x.gen.Send(id, pps, d, x.cpu); err != nil {
			return err
		}
		refused1, err = x.gen.Refused()
		return err
	}); err != nil {
		return Outcome{}, err
	}
	if rt := x.gen.LastRealTime; x.gen.RealTime > 0 && rt != nil && x.rtErr == "" {
		x.rtErr = rt.Error() // said once, in the labels: the trials ran at normal priority
	}
	time.Sleep(drain)
	c, err := x.far.Counts(id)
	if err != nil {
		return Outcome{}, err
	}
	o := Outcome{Requested: pps, Offered: float64(sent) / took.Seconds(), Sent: sent, Received: c.Packets, Skipped: x.gen.LastSkipped,
		Refused: min(refused1-min(refused0, refused1), sent)}
	if watch {
		st, err := x.stall.Read()
		if err != nil {
			return Outcome{}, err
		}
		o.Stall, o.StallBy, o.Disturbed = st.Max, st.ByName, st.Over > 0
	}
	return o, nil
}

// Close detaches everything (each in its node).
func (x *xdpGen) Close() {
	if x.gen != nil {
		_ = x.src.Do(x.gen.Close)
	}
	if x.far != nil {
		_ = x.dst.Do(x.far.Close)
	}
	if x.pass != nil {
		_ = x.next.Do(x.pass.Close)
	}
	if x.peers != nil {
		_ = x.peers.Close()
	}
	if x.stall != nil {
		_ = x.stall.Close()
	}
}

// labels describes the generator for samples.
func (x *xdpGen) labels(l map[string]string) {
	l["generator"] = GenXDP
	l["receiver"] = "xdp-counter"
	l["placement"] = x.placement
	l["sender_cpu"] = strconv.Itoa(x.cpu)
	l["receive_cpu"] = strconv.Itoa(x.rcvCPU)
	switch {
	case x.stall != nil:
		l["stall_watch"] = "the next node's NAPI threads' waits for CPU " + strconv.Itoa(x.rcvCPU) + " behind other tasks"
	case x.stallErr != "":
		l["stall_watch"] = "none: " + x.stallErr
	}
	l["sender_priority"] = "normal"
	if x.gen != nil && x.gen.RealTime > 0 {
		l["sender_priority"] = "SCHED_FIFO " + strconv.Itoa(x.gen.RealTime)
		if x.rtErr != "" {
			l["sender_priority"] = "normal (SCHED_FIFO refused: " + x.rtErr + ")"
		}
	}
}
