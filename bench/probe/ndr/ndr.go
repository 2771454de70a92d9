// Package ndr is the throughput search probe: a binary search over the offered UDP rate for
// the no-drop rate (NDR) and the partial-drop rate (PDR) at a loss threshold, per frame size,
// as RFC 2544 (section 26.1) and OPNFV NFVbench do. Its load generator is its own: a paced
// sendmmsg(2) sender in the chain's source and a recvmmsg(2) counter in the destination,
// both sockets opened in the nodes' namespaces by this process. iperf3 in UDP mode sends one
// datagram per system call and offered only a few thousand 64-byte frames per second here,
// far less than a chain of veths takes.
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

	"github.com/sfclab/sfclab/bench/probe"
	"github.com/sfclab/sfclab/results"
)

// Name is the probe's name in samples.
const Name = "ndr"

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
	if len(c.Path) < 2 {
		return fmt.Errorf("run ndr on chain %s: no path", c.Name)
	}
	dsts := probe.DestinationNodes(env.Plan, c)
	if len(dsts) == 0 {
		return fmt.Errorf("run ndr on chain %s: no destination", c.Name)
	}
	src, err := env.Node(c.Path[0])
	if err != nil {
		return err
	}
	dst, err := env.Node(dsts[0])
	if err != nil {
		return err
	}
	port := probe.ServicePort(env.Plan, c)
	target := netip.AddrPortFrom(c.Target, probe.TargetPort(env.Plan, c))
	var rfd, sfd int
	if err := dst.Do(func() (err error) {
		rfd, err = udpSocket(netip.AddrPortFrom(netip.IPv4Unspecified(), port), netip.AddrPort{})
		return err
	}); err != nil {
		return fmt.Errorf("open ndr receiver in %s: %w", dsts[0], err)
	}
	rcv := NewReceiver(rfd)
	defer rcv.Close()
	if err := src.Do(func() (err error) {
		sfd, err = udpSocket(netip.AddrPort{}, target)
		return err
	}); err != nil {
		return fmt.Errorf("open ndr sender in %s: %w", c.Path[0], err)
	}
	defer closeFD(sfd)
	calib, err := calibrate(src, cfg.Frames)
	if err != nil {
		return err
	}
	var id uint32
	for _, fs := range cfg.Frames {
		cycle, _ := Frames(fs)
		snd := NewSender(sfd, cycle)
		id++ // warm-up: neighbours resolved, caches filled; not counted
		if _, _, err := snd.Send(id, 2000, 300*time.Millisecond); err != nil {
			return fmt.Errorf("warm up ndr sender: %w", err)
		}
		time.Sleep(cfg.Drain)
		if rcv.Count(id) == 0 {
			return fmt.Errorf("run ndr on chain %s: no datagram of the warm-up reached %s port %d: the chain does not carry UDP to it", c.Name, dsts[0], port)
		}
		iter := 0
		trial := func(ctx context.Context, pps float64) (Outcome, error) {
			if err := ctx.Err(); err != nil {
				return Outcome{}, err
			}
			id++
			var errs0 uint64
			_ = dst.Do(func() (err error) { errs0, err = udpRcvbufErrors(); return err })
			sent, took, err := snd.Send(id, pps, cfg.Trial)
			if err != nil {
				return Outcome{}, err
			}
			time.Sleep(cfg.Drain)
			o := Outcome{Requested: pps, Offered: float64(sent) / took.Seconds(), Sent: sent, Received: rcv.Count(id)}
			var errs1 uint64
			_ = dst.Do(func() (err error) { errs1, err = udpRcvbufErrors(); return err })
			iter++
			// Drops at the receiver's socket: if these explain the loss, the receiver, not the
			// chain, was the limit.
			emit(probe.NewSample(Name, "trial_rcvbuf_errors", "packets", float64(errs1-min(errs0, errs1)),
				map[string]string{"frame": fs, "iteration": strconv.Itoa(iter)}))
			return o, nil
		}
		s := Search{MaxRate: cfg.MaxRate, NDRLoss: cfg.NDRLoss, PDRLoss: cfg.PDRLoss, Precision: cfg.Precision,
			MaxTrials: cfg.MaxTrials, Shortfall: 0.02}
		res, err := s.Run(ctx, trial)
		emitResult(emit, fs, cycle, cfg, res, calib[fs])
		if err != nil && !errors.Is(err, ErrGeneratorLimited) {
			return err
		}
	}
	return nil
}

// emitResult emits every step of a search and its result.
func emitResult(emit func(results.Sample), frame string, cycle []int, cfg Config, res *Result, calibrated float64) {
	if res == nil {
		return
	}
	bits := meanFrame(cycle) * 8
	for _, st := range res.Steps {
		l := map[string]string{"frame": frame, "iteration": strconv.Itoa(st.Iteration),
			"requested_pps": strconv.FormatFloat(st.Requested, 'f', 0, 64),
			"pass_ndr":      strconv.FormatBool(st.PassNDR), "pass_pdr": strconv.FormatBool(st.PassPDR),
			"generator_short": strconv.FormatBool(st.GeneratorShort)}
		emit(probe.NewSample(Name, "trial_offered_pps", "pps", st.Offered, l))
		emit(probe.NewSample(Name, "trial_received_pps", "pps", st.Offered*(1-st.Loss()), l))
		emit(probe.NewSample(Name, "trial_loss", "%", st.Loss()*100, l))
	}
	l := map[string]string{"frame": frame, "trials": strconv.Itoa(len(res.Steps)),
		"precision": strconv.FormatFloat(cfg.Precision, 'g', -1, 64),
		"pdr_loss":  strconv.FormatFloat(cfg.PDRLoss*100, 'g', -1, 64) + "%",
		"generator": "sendmmsg"}
	emit(probe.NewSample(Name, "generator_calibrated_pps", "pps", calibrated, l))
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
	l["ndr_converged"] = strconv.FormatBool(res.NDRConverged)
	l["pdr_converged"] = strconv.FormatBool(res.PDRConverged)
	emit(probe.NewSample(Name, "ndr_pps", "pps", res.NDR, l))
	emit(probe.NewSample(Name, "ndr_bps", "bit/s", res.NDR*bits, l))
	emit(probe.NewSample(Name, "pdr_pps", "pps", res.PDR, l))
	emit(probe.NewSample(Name, "pdr_bps", "bit/s", res.PDR*bits, l))
	emit(probe.NewSample(Name, "trials", "count", float64(len(res.Steps)), l))
	emit(probe.NewSample(Name, "generator_max_pps", "pps", res.GeneratorMax, l))
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
