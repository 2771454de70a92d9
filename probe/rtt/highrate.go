package rtt

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sfclab/sfclab/pktgen"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/rtt/echo"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/spec"
)

// HighRate is an RTT measurement at packet rates a socket cannot send (study D's 1 Mpps): the
// XDP live-frame generator sends 64-byte UDP frames from the chain's source, a timestamp in
// every SampleEvery-th, an XDP reflector at the destination sends every frame back, and an
// XDP program at the source records the RTT of every timestamped echo (bpf_ktime_get_ns at
// both ends, the same clock). Times are taken at the interfaces' XDP hooks, not in sockets:
// the RTT is the path's alone.
type HighRate struct {
	// Rate is the requested rate in frames per second (e.g. 1e6), or echo.Max: the generator's
	// ceiling into this chain.
	Rate float64
	// Duration is how long it sends; with Echoes set, the longest it sends.
	Duration time.Duration
	// Echoes, when set, makes the run last long enough to time this many echoes at the rate
	// it sends at, after any clamp (see echoTime).
	Echoes int
	// SampleEvery stamps every n-th frame; 0 means 1024.
	SampleEvery int
	// Port is the UDP port the frames are sent to; 0 means 9 (discard).
	Port uint16
	// CPUs, when set, pin the sending thread to the first of them (the source's host's core).
	CPUs []int
	// Labels are added to every sample (the probe's rate and method labels).
	Labels map[string]string
}

// MaxEchoTime bounds a run that lasts until Echoes echoes are timed, whatever its Duration.
const MaxEchoTime = 10 * time.Second

// echoTime is how long a run at rate (frames/s) with a timestamp in every every-th frame
// lasts to time echoes echoes: at least 100 ms, at most bound.
func echoTime(echoes, every int, rate float64, bound time.Duration) time.Duration {
	if rate <= 0 {
		return bound
	}
	d := time.Duration(float64(echoes) * float64(every) / rate * float64(time.Second))
	return min(max(d, 100*time.Millisecond), bound)
}

// ceilingTime is how long the generator sends unpaced to measure its ceiling into the chain.
const ceilingTime = 200 * time.Millisecond

// RunHighRate measures once on env's chain. It first sends unpaced for 200 ms to measure the
// generator's ceiling into this chain (what it offers when nothing paces it: on one core the
// chain's own work slows it down); a rate above it is clamped to it, and said so. It emits,
// with label method=xdp-reflector: path_end (end=xdp), rtt and path per timestamped echo (ms,
// the same figure, timed at the sender's interface's XDP hooks), generator_ceiling (pps), rate_requested and rate_achieved
// (pps; labels rate_reached, and rate_clamped_from when clamped), loss (% of frames sent that did not come back), reflector_seen and reflector_lost (frames the
// reflector saw, and those of them that did not come back: its own drops and the return path's,
// apart from the forward path's loss), reordered (echoes with a sequence number below one seen
// before), and sampled (the share of frames timestamped, %). It fails with
// pktgen.ErrUnsupported in the chain when XDP cannot run, the reason in the error.
func RunHighRate(ctx context.Context, env probe.Env, h HighRate, emit func(results.Sample)) error {
	if (h.Rate <= 0 && h.Rate != echo.Max) || h.Duration <= 0 || h.Duration > 5*time.Minute {
		return fmt.Errorf("configure rtt at high rate: rate %v pps and duration %s: want both positive, at most 5m", h.Rate, h.Duration)
	}
	if h.SampleEvery <= 0 {
		h.SampleEvery = 1024
	}
	if h.Port == 0 {
		h.Port = 9
	}
	cpu := -1
	if len(h.CPUs) > 0 {
		cpu = h.CPUs[0]
	}
	c := env.Chain
	src, dst, dstName, err := probe.Ends(env, "run rtt at high rate")
	if err != nil {
		return err
	}
	target := netip.AddrPortFrom(c.Target, h.Port)
	// A connected UDP socket gives the source address and port; datagrams to the closed port
	// resolve every hop's neighbours (pktgen.WarmPath).
	var sfd int
	if err := src.Do(func() (err error) {
		if sfd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		if err = unix.Connect(sfd, &unix.SockaddrInet4{Port: int(h.Port), Addr: c.Target.As4()}); err != nil {
			return err
		}
		pktgen.WarmPath(sfd, 2*time.Second)
		return nil
	}); err != nil {
		return fmt.Errorf("open rtt sender in %s: %w", c.Path[0], err)
	}
	defer unix.Close(sfd)
	var closers []func()
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	// An end attached by ebpf-redirect receives by bpf_redirect_peer, past a veth's native
	// XDP hook: its programs run in generic mode there.
	redirected := func(name string) bool {
		n := env.Plan.Node(name)
		return n != nil && n.Driver != nil && n.Driver.Type == spec.DriverEBPFRedirect
	}
	// Frames sent with XDP_TX leave below the qdisc layer, at the source (the generator) and at
	// the destination (the reflector's echoes): a shaper on either end's own link would never
	// see them, and the run would measure an unshaped link. The socket path goes through it.
	// The destination's are checked here, the source's once its interface is known.
	var refl *pktgen.Far
	if err := dst.Do(func() error {
		idx, err := pktgen.InterfaceIndexes(false)
		if err != nil {
			return err
		}
		for _, ix := range idx {
			if err := bypassed("destination", ix); err != nil {
				return err
			}
		}
		if redirected(dstName) {
			refl, err = pktgen.NewFarGeneric(idx, h.Port, pktgen.Reflect)
		} else {
			refl, err = pktgen.NewFar(idx, h.Port, pktgen.Reflect)
		}
		return err
	}); err != nil {
		return fmt.Errorf("attach reflector in %s: %w", dstName, err)
	}
	closers = append(closers, func() { _ = dst.Do(refl.Close) })
	// Every node between the ends gets sfc_pass on its veths: XDP transmission into a veth,
	// either way, needs a NAPI instance there.
	for _, name := range c.Path[1 : len(c.Path)-1] {
		n, err := env.Node(name)
		if err != nil {
			return err
		}
		var f *pktgen.Far
		if err := n.Do(func() error {
			idx, err := pktgen.InterfaceIndexes(true)
			if err != nil || len(idx) == 0 {
				return err
			}
			f, err = pktgen.NewFar(idx, h.Port, pktgen.Pass)
			return err
		}); err != nil {
			return fmt.Errorf("run rtt at high rate in %s: %w", name, err)
		}
		if f != nil {
			closers = append(closers, func() { _ = n.Do(f.Close) })
		}
	}
	var gen *pktgen.Generator
	var ifindex int
	if err := src.Do(func() error {
		// A freshly deployed link may drop the first datagrams: up to 2 s for the next hop's
		// MAC.
		deadline := time.Now().Add(2 * time.Second)
		flow, ix, err := pktgen.FlowFrom(sfd, target)
		for errors.Is(err, pktgen.ErrNoNeighbour) && time.Now().Before(deadline) {
			_, _ = unix.Write(sfd, make([]byte, 16))
			time.Sleep(20 * time.Millisecond)
			flow, ix, err = pktgen.FlowFrom(sfd, target)
		}
		if err != nil {
			return fmt.Errorf("%w: %v", pktgen.ErrUnsupported, err)
		}
		ifindex = ix
		if err := bypassed("source", ix); err != nil {
			return err
		}
		if gen, err = pktgen.NewGenerator(ifindex, flow, []int{pktgen.MinFrame}, h.SampleEvery); err != nil {
			return err
		}
		if redirected(c.Path[0]) {
			return gen.EchoGeneric()
		}
		return nil
	}); err != nil {
		if gen != nil {
			_ = src.Do(gen.Close)
		}
		return fmt.Errorf("start generator in %s: %w", c.Path[0], err)
	}
	closers = append(closers, func() { _ = src.Do(gen.Close) })
	// The peers of the ends' veths that are in no node of the chain (a node on a bridge has
	// its peer in its host's namespace) need a NAPI instance for the frames sent with XDP_TX.
	for _, end := range []struct {
		n    probe.Node
		name string
		idx  func() ([]int, error)
	}{
		{src, c.Path[0], func() ([]int, error) { return []int{ifindex}, nil }},
		{dst, dstName, func() ([]int, error) { return pktgen.InterfaceIndexes(true) }},
	} {
		var f *pktgen.Far
		if err := end.n.Do(func() error {
			idx, err := end.idx()
			if err != nil {
				return err
			}
			f, err = pktgen.PassPeers(idx, h.Port)
			return err
		}); err != nil {
			return fmt.Errorf("prepare the peers of %s's veths: %w", end.name, err)
		}
		closers = append(closers, func() { _ = f.Close() })
	}
	if err := gen.StartEchoes(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The ceiling: unpaced, into this chain (trial 1; its echoes are discarded).
	// It counts the frames that left the sender's interface: the program's count also holds
	// those the veth refused with its peer's ring full, nearly all of them unpaced
	// (docs/packet-rate.md, "The ceiling counted refused frames").
	var sent, refused0, refused1 uint64
	var took time.Duration
	if err := src.Do(func() (err error) {
		if refused0, err = gen.Refused(); err != nil {
			return err
		}
		if sent, took, err = gen.Send(1, 0, ceilingTime, cpu); err != nil {
			return err
		}
		refused1, err = gen.Refused()
		return err
	}); err != nil {
		return err
	}
	refused := min(refused1-min(refused0, refused1), sent)
	ceiling := float64(sent-refused) / took.Seconds()
	time.Sleep(200 * time.Millisecond)
	if _, err := gen.TakeEchoes(time.Second); err != nil {
		return err
	}
	labels := map[string]string{"method": echo.MethodXDPName, "sample_every": strconv.Itoa(h.SampleEvery), "frame": "64"}
	for k, v := range h.Labels {
		labels[k] = v
	}
	rate := h.Rate
	switch {
	case rate == echo.Max:
		rate = 0 // unpaced: the ceiling
	case rate > ceiling:
		// Asked beyond what the generator offers into this chain: clamped, and said so.
		labels["rate_clamped_from"] = strconv.FormatFloat(rate, 'f', 0, 64)
		rate = ceiling
	}
	with := func(kv ...string) map[string]string {
		l := map[string]string{}
		for k, v := range labels {
			l[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	emit(probe.NewSample(Name, "generator_ceiling", "pps", ceiling, with("ceiling_program_pps", strconv.FormatFloat(float64(sent)/took.Seconds(), 'f', 0, 64),
		"ceiling_refused", fmt.Sprintf("%d of %d", refused, sent))))
	d := h.Duration
	if h.Echoes > 0 {
		paced := rate
		if paced == 0 {
			paced = ceiling
		}
		d = echoTime(h.Echoes, h.SampleEvery, paced, min(h.Duration, MaxEchoTime))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	const trial = 2
	if err := src.Do(func() (err error) { sent, took, err = gen.Send(trial, rate, d, cpu); return err }); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond) // echoes in flight
	echoes, err := gen.TakeEchoes(time.Second)
	if err != nil {
		return err
	}
	back, err := gen.Echoes(trial)
	if err != nil {
		return err
	}
	seen, err := refl.Counts(trial)
	if err != nil {
		return err
	}
	// The round trip is taken at the sender's interface (its XDP hooks): it is the path's, and
	// the same figure stands as the application's (no socket is in the way).
	for _, e := range echoes {
		seq := strconv.FormatUint(uint64(e.Seq), 10)
		emit(probe.NewSample(Name, "rtt", "ms", float64(e.RTT)/1e6, with("seq", seq)))
		emit(probe.NewSample(Name, "path", "ms", float64(e.RTT)/1e6, with("seq", seq, "tx_stamp", echo.PathEndXDP)))
	}
	emit(probe.NewSample(Name, "path_end", "count", float64(len(echoes)), with("end", echo.PathEndXDP)))
	achieved := float64(sent) / took.Seconds()
	reached := strconv.FormatBool(h.Rate == echo.Max || achieved >= 0.99*h.Rate)
	if h.Rate != echo.Max {
		emit(probe.NewSample(Name, "rate_requested", "pps", h.Rate, with("rate_reached", reached)))
	}
	emit(probe.NewSample(Name, "rate_achieved", "pps", achieved, with("rate_reached", reached)))
	loss := 100.0
	if sent > 0 {
		loss = float64(sent-min(sent, back.Packets)) / float64(sent) * 100
	}
	emit(probe.NewSample(Name, "loss", "%", loss, with()))
	emit(probe.NewSample(Name, "reflector_seen", "count", float64(seen.Packets), with()))
	emit(probe.NewSample(Name, "reflector_lost", "count", float64(seen.Packets-min(seen.Packets, back.Packets)), with()))
	emit(probe.NewSample(Name, "reordered", "count", float64(back.Reordered), with()))
	emit(probe.NewSample(Name, "sampled", "%", 100/float64(h.SampleEvery), with()))
	return nil
}

// bypassed fails, wrapping pktgen.ErrUnsupported (the probe then falls back to the socket path
// with the reason), when interface ifindex (in the calling thread's namespace) has a root
// qdisc that shapes or alters traffic (pktgen.BypassedQdisc): the generator's frames and the
// reflector's echoes leave with XDP_TX, below the qdisc layer, and would never meet it.
func bypassed(end string, ifindex int) error {
	q, err := pktgen.BypassedQdisc(ifindex)
	if err != nil {
		return fmt.Errorf("%w: %v", pktgen.ErrUnsupported, err)
	}
	if q == "" {
		return nil
	}
	name := strconv.Itoa(ifindex)
	if l, err := netlink.LinkByIndex(ifindex); err == nil {
		name = l.Attrs().Name
	}
	return fmt.Errorf("%w: the %s's interface %s is shaped by qdisc %s, which XDP_TX frames bypass (they leave below the qdisc layer)",
		pktgen.ErrUnsupported, end, name, q)
}
