// Package ndr is the throughput search probe: a binary search over the offered UDP rate for
// the no-drop rate (NDR) and the partial-drop rate (PDR) at a loss threshold, per frame size,
// as RFC 2544 (section 26.1) and OPNFV NFVbench do. Its load generator is its own: by default
// pktgen's XDP live-frame generator in the chain's source (frames built in the kernel, no
// socket) counted by an XDP program in the destination before any socket could drop them;
// where that cannot run (no veth at the source, frames above 1518 bytes, no XDP) a paced
// sendmmsg(2) sender counted by recvmmsg(2), the reason stated in the samples. iperf3 in UDP
// mode sends one datagram per system call and offered only a few thousand 64-byte frames per
// second here; sendmmsg about 0.4 Mpps, less than a veth chain takes; the XDP generator
// several Mpps (docs/packet-rate.md).
package ndr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/ndr/count"
	"github.com/sfclab/sfclab/probe/ndr/send"
	"github.com/sfclab/sfclab/results"
)

// Name is the probe's name in samples.
const Name = "ndr"

// GuestSettle is how long a VM guest destination's count of a trial must not have grown before
// it is read (count.Receiver.Settled, at most 5 s): under TCG the guest's emulated CPU may
// still be reading the trial's datagrams from its socket when the sender's drain ends, and
// those arrived; what is still in QEMU's queues then counts as lost.
const GuestSettle = 200 * time.Millisecond

// ErrXDPGuest is why the XDP generator does not run to a VM guest destination.
var ErrXDPGuest = errors.New("the destination is a VM guest, where the XDP generator's counter cannot be attached from the host (its network stack is the guest's kernel's): the socket sender runs, counted by the guest's agent")

// ErrXDPGuestSource is why the XDP generator does not run from a VM guest source.
var ErrXDPGuestSource = errors.New("the source is a VM guest, where the XDP generator cannot be attached from the host (its network stack is the guest's kernel's): the socket sender (sendmmsg) runs in the guest's agent")

// GuestSender is the generator label's note for a sender in a VM guest source.
const GuestSender = "sendmmsg in the guest (its agent)"

// Config is one search per frame size.
type Config struct {
	// Frames are frame sizes in bytes ("64", "512", "1518") or "imix"; none means 64.
	Frames []string
	// Trial is how long each trial sends; 0 means 2 s (RFC 2544 asks for 60 s).
	Trial time.Duration
	// Drain is how long to wait after a trial for packets still in flight; 0 means 300 ms.
	Drain time.Duration
	// Precision is the relative width at which a rate counts as found; 0 means 0.01.
	Precision float64
	// MaxTrials bounds each search; 0 means 16.
	MaxTrials int
	// MaxRate is the upper bound in packets per second; 0 means as fast as the generator can.
	MaxRate float64
	// NDRLoss is the loss fraction the NDR allows (0 = none); PDRLoss the PDR's (0 means 0.001).
	NDRLoss, PDRLoss float64
	// Generator is GenAuto (default), GenXDP or GenSendmmsg.
	Generator string
	// Confirm is how many times a converged NDR is tried again (RFC 8219 section 7 repeats
	// trials); 0 means 2, a negative value none.
	Confirm int
}

func (c Config) withDefaults() Config {
	if len(c.Frames) == 0 {
		c.Frames = []string{"64"}
	}
	if c.Trial <= 0 {
		c.Trial = 2 * time.Second
	}
	if c.Drain <= 0 {
		c.Drain = 300 * time.Millisecond
	}
	if c.Precision <= 0 {
		c.Precision = 0.01
	}
	if c.MaxTrials <= 0 {
		c.MaxTrials = 16
	}
	if c.PDRLoss <= 0 {
		c.PDRLoss = 0.001
	}
	if c.Generator == "" {
		c.Generator = GenAuto
	}
	switch {
	case c.Confirm == 0:
		c.Confirm = 2
	case c.Confirm < 0:
		c.Confirm = 0
	}
	return c
}

// Validate checks a configuration.
func (c Config) Validate() error {
	c = c.withDefaults()
	for _, f := range c.Frames {
		if _, err := Frames(f); err != nil {
			return fmt.Errorf("configure ndr: %w", err)
		}
	}
	switch {
	case c.Precision >= 0.5:
		return fmt.Errorf("configure ndr: precision %v: give a fraction below 0.5, e.g. 0.01", c.Precision)
	case c.MaxTrials > 100:
		return fmt.Errorf("configure ndr: max trials %d: at most 100", c.MaxTrials)
	case c.Trial > 5*time.Minute:
		return fmt.Errorf("configure ndr: trial %s: at most 5m", c.Trial)
	case c.NDRLoss < 0 || c.NDRLoss >= 1 || c.PDRLoss >= 1 || c.PDRLoss < c.NDRLoss:
		return fmt.Errorf("configure ndr: losses ndr %v, pdr %v: want 0 <= ndr <= pdr < 1", c.NDRLoss, c.PDRLoss)
	case c.Generator != GenAuto && c.Generator != GenXDP && c.Generator != GenSendmmsg:
		return fmt.Errorf("configure ndr: generator %q: give auto, xdp or sendmmsg", c.Generator)
	case c.MaxRate < 0:
		return fmt.Errorf("configure ndr: max rate %v is negative", c.MaxRate)
	}
	return nil
}

// Probe runs the search.
type Probe struct{ cfg Config }

// New returns the probe.
func New(c Config) *Probe { return &Probe{cfg: c.withDefaults()} }

// Name is "ndr".
func (*Probe) Name() string { return Name }

// Run searches every frame size. Every trial is emitted as samples (trial_offered_pps,
// trial_received_pps, trial_loss), then per frame size ndr_pps/ndr_bps and pdr_pps/pdr_bps,
// or, when the generator could not offer more than the chain took, generator_max_pps with
// limited=true and no NDR.
func (p *Probe) Run(ctx context.Context, env probe.Env, emit func(results.Sample)) error {
	cfg := p.cfg
	if err := cfg.Validate(); err != nil {
		return err
	}
	c := env.Chain
	src, dst, dstName, err := probe.Ends(env, "run ndr")
	if err != nil {
		return err
	}
	port := probe.ServicePort(env.Plan, c)
	target := netip.AddrPortFrom(c.Target, probe.TargetPort(env.Plan, c))
	var rfd, sfd int
	// The receiver: in the destination's network stack, or in a VM guest's, where Go code
	// cannot enter, run by its agent (count.Guest).
	var rcv *Receiver
	var grc count.Counter
	if g, ok := probe.InGuest(dst); ok {
		cg, ok := g.(count.Guest)
		if !ok {
			return fmt.Errorf("run ndr on chain %s: destination %s is a guest that counts no datagrams", c.Name, dstName)
		}
		if grc, err = cg.ListenCount(ctx, port); err != nil {
			return fmt.Errorf("open ndr receiver in %s: %w", dstName, err)
		}
		defer grc.Close()
	} else {
		if err := dst.Do(func() (err error) {
			rfd, err = udpSocket(netip.AddrPortFrom(netip.IPv4Unspecified(), port), netip.AddrPort{})
			return err
		}); err != nil {
			return fmt.Errorf("open ndr receiver in %s: %w", dstName, err)
		}
		rcv = NewReceiver(rfd)
		defer rcv.Close()
	}
	// read is a trial's count at the receiver and the destination's UdpRcvbufErrors, after
	// the drain (a guest's count once it stopped growing for GuestSettle).
	read := func(id uint32, settle bool) (received, rcvbufErrors uint64, err error) {
		if grc != nil {
			quiet := time.Duration(0)
			if settle {
				quiet = GuestSettle
			}
			r, err := grc.Read(ctx, id, quiet)
			return r.Received, r.RcvbufErrors, err
		}
		received = rcv.Count(id)
		_ = dst.Do(func() (err error) { rcvbufErrors, err = udpRcvbufErrors(); return err })
		return received, rcvbufErrors, nil
	}
	// The sender: in the source's network stack, or in a VM guest's, run by its agent
	// (send.Guest): the same sendmmsg sender, its calibration and each trial's sending timed
	// by the guest's clock.
	var remote send.Remote
	var calib map[string]float64
	if g, ok := probe.InGuest(src); ok {
		sg, ok := g.(send.Guest)
		if !ok {
			return fmt.Errorf("run ndr on chain %s: source %s is a guest that sends no datagrams", c.Name, c.Path[0])
		}
		if remote, err = sg.OpenSender(ctx, target, cfg.Frames); err != nil {
			return fmt.Errorf("open ndr sender in %s: %w", c.Path[0], err)
		}
		defer remote.Close()
		calib = remote.Calibrated()
	} else {
		if err := src.Do(func() (err error) {
			sfd, err = udpSocket(netip.AddrPort{}, target)
			return err
		}); err != nil {
			return fmt.Errorf("open ndr sender in %s: %w", c.Path[0], err)
		}
		defer closeFD(sfd)
		if calib, err = calibrate(src, cfg.Frames); err != nil {
			return err
		}
	}
	var id uint32
	for _, fs := range cfg.Frames {
		cycle, _ := Frames(fs)
		var snd trialSender
		if remote != nil {
			snd = guestSender{ctx: ctx, r: remote, frame: fs}
		} else {
			snd = NewSender(sfd, cycle)
		}
		id++ // warm-up: neighbours resolved, caches filled; not counted
		if _, _, err := snd.Send(id, 2000, 300*time.Millisecond); err != nil {
			return fmt.Errorf("warm up ndr sender: %w", err)
		}
		time.Sleep(cfg.Drain)
		if n, _, err := read(id, true); err != nil {
			return fmt.Errorf("run ndr on chain %s: %w", c.Name, err)
		} else if n == 0 {
			return fmt.Errorf("run ndr on chain %s: no datagram of the warm-up reached %s port %d: the chain does not carry UDP to it", c.Name, dstName, port)
		}
		gi := genInfo{name: GenSendmmsg, ceiling: calib[fs], maxRate: cfg.MaxRate}
		var x *xdpGen
		if remote != nil || grc != nil {
			// Its program runs in the source's network stack and its counter is an XDP
			// program in the destination's: a guest's at either end cannot have them.
			why := ErrXDPGuest
			if remote != nil {
				why = ErrXDPGuestSource
			}
			if cfg.Generator == GenXDP {
				return fmt.Errorf("run ndr on chain %s with the xdp generator: %w", c.Name, why)
			}
			gi.fallback = why.Error()
		} else if cfg.Generator != GenSendmmsg {
			var next probe.Node = dst
			if len(c.Path) > 2 {
				if next, err = env.Node(c.Path[1]); err != nil {
					return err
				}
			}
			x, err = newXDPGen(ctx, src, next, dst, sfd, target, port, cycle, true)
			if err == nil {
				// The frames must reach the counter, and the ceiling is what the generator
				// offers into this chain unpaced: the frames that left its interface. Its
				// program's count also holds the frames the veth refused (the first hop's
				// ring full), which it drops at almost no cost: counted, the ceiling was
				// 19.9 Mpps of 64 B and 8.8 Mpps of 1518 B frames (107 Gbit/s) on a 2-core
				// host (docs/packet-rate.md, "The ceiling counted refused frames").
				id++
				var o Outcome
				if o, err = x.trial(id, 20e3, 100*time.Millisecond, cfg.Drain); err == nil && o.Received == 0 {
					err = fmt.Errorf("no frame of the XDP generator reached the counter at %s (%d sent)", dstName, o.Sent)
				}
				if err == nil {
					id++
					if o, err = x.trial(id, 0, 300*time.Millisecond, cfg.Drain); err == nil {
						gi = genInfo{name: GenXDP, ceiling: o.Offered * float64(o.Sent-o.Refused) / float64(max(o.Sent, 1)),
							maxRate: cfg.MaxRate, x: x, ceilingSent: o.Offered, ceilingRefused: o.Refused, ceilingFrames: o.Sent}
						if gi.ceiling <= 0 {
							err = fmt.Errorf("the source's interface refused every frame of the XDP generator (%d sent)", o.Sent)
						}
					}
				}
				if err != nil {
					x.Close()
					x = nil
				}
			}
			if err != nil {
				if cfg.Generator == GenXDP {
					return fmt.Errorf("run ndr on chain %s with the xdp generator: %w", c.Name, err)
				}
				gi.fallback = err.Error()
			}
		}
		if gi.maxRate > gi.ceiling && gi.ceiling > 0 {
			// Asked beyond what the generator offers: clamped, and said so.
			gi.clampedFrom, gi.maxRate = gi.maxRate, gi.ceiling
		}
		if x != nil && gi.maxRate == 0 {
			// Unpaced, the XDP generator's program outruns any first hop and most of its
			// frames are refused at its interface (99 % into the shaped forwarder): its
			// offered rate would be the program's, not what entered the chain. The search
			// starts at the ceiling, paced; no loss there makes the NDR at least the ceiling.
			gi.maxRate = gi.ceiling
		}
		iter := 0
		trial := func(ctx context.Context, pps float64) (Outcome, error) {
			if err := ctx.Err(); err != nil {
				return Outcome{}, err
			}
			id++
			iter++
			if x != nil {
				return x.trial(id, pps, cfg.Trial, cfg.Drain)
			}
			_, errs0, err := read(id, false)
			if err != nil {
				return Outcome{}, err
			}
			sent, took, err := snd.Send(id, pps, cfg.Trial)
			if err != nil {
				return Outcome{}, err
			}
			time.Sleep(cfg.Drain)
			received, errs1, err := read(id, true)
			if err != nil {
				return Outcome{}, err
			}
			// Drops at the receiver's socket buffer: the chain delivered these, the measuring
			// receiver lost them, so they are not chain loss (Outcome.ReceiverDrops).
			o := Outcome{Requested: pps, Offered: float64(sent) / took.Seconds(), Sent: sent, Received: received,
				ReceiverDrops: errs1 - min(errs0, errs1)}
			emit(probe.NewSample(Name, "trial_rcvbuf_errors", "packets", float64(o.ReceiverDrops),
				map[string]string{"frame": fs, "iteration": strconv.Itoa(iter)}))
			return o, nil
		}
		s := Search{MaxRate: gi.maxRate, NDRLoss: cfg.NDRLoss, PDRLoss: cfg.PDRLoss, Precision: cfg.Precision,
			MaxTrials: cfg.MaxTrials, Shortfall: 0.02, Confirm: cfg.Confirm}
		if x != nil {
			// The XDP generator's shortfall is its own (held off its CPU, frames skipped), not
			// the chain's back-pressure: such a trial is not a trial at its rate.
			s.ShortRepeats = ShortRepeats
			if x.stall != nil {
				// A loss while another task held the chain's receiving side off its CPU
				// may be the host's: run again (docs/packet-rate.md).
				s.DisturbedRepeats = DisturbedRepeats
			}
		}
		res, err := s.Run(ctx, trial)
		if x != nil {
			x.Close()
		}
		if grc != nil {
			gi.receiver = "recvmmsg in the guest (its agent)"
		}
		if remote != nil {
			gi.sender = GuestSender
		}
		emitResult(emit, fs, cycle, cfg, res, calib[fs], gi)
		if err != nil && !errors.Is(err, ErrGeneratorLimited) && !errors.Is(err, ErrGeneratorShort) {
			return err
		}
	}
	return nil
}

// genInfo is what a search says about its generator.
type genInfo struct {
	name string
	// ceiling is the most it offers (pps): the XDP generator's unpaced rate into the chain, or
	// the socket sender's rate with no chain in the way.
	ceiling, maxRate, clampedFrom float64
	// ceilingSent is the XDP generator's program rate in the ceiling trial, ceilingFrames its
	// frames, ceilingRefused those its interface refused (not in ceiling).
	ceilingSent                   float64
	ceilingFrames, ceilingRefused uint64
	// fallback is why the XDP generator was not used ("" when it was, or not tried).
	fallback string
	// receiver names the socket receiver where it is not the probe's own ("" : recvmmsg).
	receiver string
	// sender names the socket sender where it is not the probe's own ("": sendmmsg in the
	// source's stack).
	sender string
	x      *xdpGen
}

// emitResult emits every step of a search and its result.
func emitResult(emit func(results.Sample), frame string, cycle []int, cfg Config, res *Result, calibrated float64, gi genInfo) {
	if res == nil {
		return
	}
	bits := meanFrame(cycle) * 8
	for _, st := range res.Steps {
		l := map[string]string{"frame": frame, "iteration": strconv.Itoa(st.Iteration),
			"requested_pps": strconv.FormatFloat(st.Requested, 'f', 0, 64),
			"pass_ndr":      strconv.FormatBool(st.PassNDR), "pass_pdr": strconv.FormatBool(st.PassPDR),
			"generator_short": strconv.FormatBool(st.GeneratorShort), "generator_skipped": strconv.FormatUint(st.Skipped, 10),
			"inconsistent": strconv.FormatBool(st.Inconsistent), "confirming": strconv.FormatBool(st.Confirming),
			"invalid": strconv.FormatBool(st.Invalid), "refused_at_source": strconv.FormatUint(st.Refused, 10)}
		if st.Stall > 0 || st.Disturbed {
			l["stall_us"] = strconv.FormatInt(st.Stall.Microseconds(), 10)
			l["stall_by"] = st.StallBy
			l["disturbed"] = strconv.FormatBool(st.Disturbed)
		}
		emit(probe.NewSample(Name, "trial_offered_pps", "pps", st.Offered, l))
		emit(probe.NewSample(Name, "trial_received_pps", "pps", st.Offered*(1-st.Loss()), l))
		emit(probe.NewSample(Name, "trial_loss", "%", st.Loss()*100, l))
	}
	l := map[string]string{"frame": frame, "trials": strconv.Itoa(len(res.Steps)),
		"precision": strconv.FormatFloat(cfg.Precision, 'g', -1, 64),
		"pdr_loss":  strconv.FormatFloat(cfg.PDRLoss*100, 'g', -1, 64) + "%",
		"generator": gi.name, "receiver": "recvmmsg"}
	if gi.receiver != "" {
		l["receiver"] = gi.receiver
	}
	if gi.sender != "" {
		l["sender"] = gi.sender
	}
	if gi.x != nil {
		gi.x.labels(l)
	}
	if gi.fallback != "" {
		l["fallback_reason"] = gi.fallback
	}
	if gi.ceilingFrames > 0 {
		// The ceiling counts the frames that left; what the program sent and what the
		// interface refused of it are kept beside it.
		l["ceiling_program_pps"] = strconv.FormatFloat(gi.ceilingSent, 'f', 0, 64)
		l["ceiling_refused"] = fmt.Sprintf("%d of %d", gi.ceilingRefused, gi.ceilingFrames)
	}
	if gi.clampedFrom > 0 {
		l["max_rate_clamped_from"] = strconv.FormatFloat(gi.clampedFrom, 'f', 0, 64)
	}
	emit(probe.NewSample(Name, "generator_calibrated_pps", "pps", calibrated, l))
	emit(probe.NewSample(Name, "generator_ceiling_pps", "pps", gi.ceiling, l))
	if res.Limited {
		l["limited"] = "true"
		// The generator alone (into a socket in its own node) could send more than it did
		// into the chain: the chain slowed the sender down without dropping (back-pressure).
		l["reason"] = "generator"
		if calibrated > 0 && res.GeneratorMax < 0.9*calibrated {
			l["reason"] = "back-pressure"
		}
		emit(probe.NewSample(Name, "generator_max_pps", "pps", res.GeneratorMax, l))
		return
	}
	if res.ShortAt > 0 {
		// The lowest rate the generator could not hold in any repetition.
		l["generator_short_at_pps"] = strconv.FormatFloat(res.ShortAt, 'f', 0, 64)
	}
	if res.Short {
		// No loss below the rate the generator could not hold: the NDR is a lower bound.
		l["stopped"] = fmt.Sprintf("no loss below %.1f kpps, which the generator could not hold", res.ShortAt/1e3)
	}
	l["ndr_converged"] = strconv.FormatBool(res.NDRConverged)
	l["pdr_converged"] = strconv.FormatBool(res.PDRConverged)
	// "at least": no loss at the max rate, so the figure is a lower bound, not a drop point.
	l["ndr_bound"], l["pdr_bound"] = "found", "found"
	if res.AtMax {
		l["ndr_bound"] = "at least"
	}
	if res.PDRAtMax {
		l["pdr_bound"] = "at least"
	}
	l["ndr_hi_pps"] = strconv.FormatFloat(res.NDRHi, 'f', 0, 64)
	l["pdr_hi_pps"] = strconv.FormatFloat(res.PDRHi, 'f', 0, 64)
	l["inconsistent_trials"] = strconv.Itoa(res.Inconsistent)
	l["receiver_drops"] = strconv.FormatUint(res.ReceiverDrops, 10)
	if gi.x != nil && gi.x.stall != nil {
		// Trials that lost frames while the receiving side was held off its CPU: run again,
		// and those whose loss counted after every repetition.
		l["disturbed_trials"] = fmt.Sprintf("%d, %d kept as loss", res.Disturbed, res.DisturbedKept)
	}
	l["confirm"] = strconv.Itoa(cfg.Confirm)
	emit(probe.NewSample(Name, "ndr_pps", "pps", res.NDR, l))
	emit(probe.NewSample(Name, "ndr_bps", "bit/s", res.NDR*bits, l))
	emit(probe.NewSample(Name, "pdr_pps", "pps", res.PDR, l))
	emit(probe.NewSample(Name, "pdr_bps", "bit/s", res.PDR*bits, l))
	emit(probe.NewSample(Name, "trials", "count", float64(len(res.Steps)), l))
	emit(probe.NewSample(Name, "generator_max_pps", "pps", res.GeneratorMax, l))
}

// trialSender sends one trial: the probe's own Sender, or guestSender.
type trialSender interface {
	Send(trial uint32, pps float64, d time.Duration) (uint64, time.Duration, error)
}

// guestSender sends a trial of one frame size through a VM guest's agent.
type guestSender struct {
	ctx   context.Context
	r     send.Remote
	frame string
}

func (g guestSender) Send(trial uint32, pps float64, d time.Duration) (uint64, time.Duration, error) {
	s, err := g.r.Send(g.ctx, send.Trial{Frame: g.frame, ID: trial, Rate: pps, Duration: d})
	return s.Datagrams, s.Took, err
}

// ParsePPS parses a packet rate: "200000", "500kpps", "1.5Mpps".
func ParsePPS(s string) (float64, error) {
	num, mult := strings.TrimSpace(s), 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"Mpps", 1e6}, {"kpps", 1e3}, {"pps", 1}} {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSuffix(num, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) {
		return 0, fmt.Errorf("packet rate %q: give a positive number with pps, kpps or Mpps, e.g. 500kpps", s)
	}
	return v * mult, nil
}

// ParsePercent parses a fraction written as a percentage: "0.1%" is 0.001.
func ParsePercent(s string) (float64, error) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !ok || err != nil || v < 0 || v >= 100 {
		return 0, fmt.Errorf("percentage %q: give a number from 0 to below 100 followed by %%, e.g. 0.1%%", s)
	}
	return v / 100, nil
}
