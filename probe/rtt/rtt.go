// Package rtt is sfclab's own round-trip probe, built to be trusted at high rates: ICMP echo
// (as ping, from a raw socket) or UDP echo (to a small responder the probe starts in the
// destination node), fixed-size messages at a requested rate (1 pps up to a flood, as ping -f)
// paced on a locked thread (above 50 Kpps on two or more, each on its own socket and taking its
// share of one schedule), every echo's round trip kept. Each echo is timestamped four times —
// in user space before the send and after the reply is read, and by the kernel (SO_TIMESTAMPING,
// software) when the driver transmits it and when the reply enters the stack — so a round trip
// splits into time in the sender's stack and time on the path, as study D's extra capture
// points did. The rate achieved is always reported beside the rate requested; loss,
// duplicates and reordering are counted.
package rtt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/pktgen"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/rtt/echo"
	"github.com/sfclab/sfclab/results"
)

// Name is the probe's name in samples.
const Name = "rtt"

// Errors of a VM guest end.
var (
	// ErrXDPGuest is why echo.MethodXDP does not run to a VM guest destination.
	ErrXDPGuest = errors.New("the destination is a VM guest, where the XDP reflector cannot be attached from the host (its network stack is the guest's kernel's): use method socket")
	// ErrXDPGuestSource is why echo.MethodXDP does not run from a VM guest source.
	ErrXDPGuestSource = errors.New("the source is a VM guest, where pktgen's XDP generator cannot be attached from the host (its network stack is the guest's kernel's): use method socket, whose echoes the guest's agent sends")
	// ErrTCGuestSource is why echo.PathEndTC does not run from a VM guest source.
	ErrTCGuestSource = errors.New("the source is a VM guest, where the tc path-end programs cannot be attached from the host (its interface is the guest kernel's): use path_end socket")
)

// GuestClock is the clock label of samples from a VM guest source: their timestamps were
// taken by the guest's clock, in the guest's stack.
const GuestClock = "guest"

// measureGuest runs echo.Measure in a VM guest source's agent (echo.Guest): the socket's
// timestamps (echo.PathEndSocket; unset falls back to it, saying why), every one by the guest's
// clock. The run's CPU is the guest agent's, on the guest's (emulated) CPU, not the sfclab
// process's: it is left out (no cpu_self sample).
func measureGuest(ctx context.Context, g echo.Guest, dst netip.AddrPort, cfg Config) (*Result, error) {
	asked := cfg.PathEnd
	cfg.PathEnd = echo.PathEndSocket
	r, err := g.Echo(ctx, dst, cfg)
	if r != nil {
		r.PathEnd = echo.PathEndSocket
		if asked == "" {
			r.PathEndNote = ErrTCGuestSource.Error()
		}
		r.CPU, r.CPUUser, r.Wall = 0, 0, 0
	}
	return r, err
}

// WarmTime bounds Warm.
const WarmTime = 3 * time.Second

// Warm sends single echoes 10 ms apart until one comes back or WarmTime passed, so that the
// measured run does not pay for what only the first packets pay: neighbour resolution, and a
// freshly deployed link's qdisc, which the kernel attaches up to a second after the link came
// up (until then packets are dropped). No reply is not an error: a chain may have no echo path.
func Warm(ctx context.Context, src Doer, dst netip.AddrPort, cfg Config) error {
	return warm(ctx, func(ctx context.Context, cfg Config) (*Result, error) { return echo.Measure(ctx, src, dst, cfg) }, cfg)
}

// warm is Warm with measure sending the echoes (from a namespace, or a guest's agent).
func warm(ctx context.Context, measure func(context.Context, Config) (*Result, error), cfg Config) error {
	cfg = cfg.WithDefaults()
	cfg.Count, cfg.Rate, cfg.Duration, cfg.Timeout = 1, 1, 0, 10*time.Millisecond
	cfg.Attempts = 0
	deadline := time.Now().Add(WarmTime)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r, err := measure(ctx, cfg)
		if err != nil {
			return fmt.Errorf("warm up: %w", err)
		}
		if r.Received > 0 {
			return nil
		}
	}
	return ctx.Err()
}

// runXDP runs echo.MethodXDP on the chain, samples labelled as the socket path's (protocol, size,
// rate).
func runXDP(ctx context.Context, env probe.Env, cfg Config, emit func(results.Sample)) error {
	h := HighRate{Rate: cfg.Rate, Duration: cfg.Duration, SampleEvery: cfg.SampleEvery, CPUs: cfg.CPUs}
	if cfg.Duration == 0 {
		h.Duration, h.Echoes = MaxEchoTime, cfg.Count
	}
	h.Labels = map[string]string{"protocol": echo.ProtoUDP, "size": "26", "rate": echo.RateLabel(cfg.Rate)}
	return RunHighRate(ctx, env, h, emit)
}

type prober struct{ cfg Config }

// New returns the rtt probe.
func New(cfg Config) probe.Probe { return &prober{cfg: cfg} }

// Name returns "rtt".
func (*prober) Name() string { return Name }

// Run sends echoes from the chain's source to the destination's own address (as the ping
// probe: through an L4 proxy there is no echo path, and the run reports 100 % loss), with a
// UDP responder started in the destination's first instance for protocol udp and stopped
// before Run returns. It emits Samples of the run; a rate not reached is in the samples
// (rate_achieved beside rate_requested, label rate_reached=false), never silent.
func (p *prober) Run(ctx context.Context, env probe.Env, emit func(results.Sample)) error {
	cfg := p.cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("run rtt: %w", err)
	}
	c := env.Chain
	dest := probe.DestinationAddr(env.Plan, c)
	dests := probe.DestinationNodes(env.Plan, c)
	if !dest.IsValid() || len(c.Path) == 0 || len(dests) == 0 {
		return fmt.Errorf("run rtt on chain %s: destination %q has no address", c.Name, c.To)
	}
	if h := env.Plan.HostOf(c.Path[0]); h != nil && h.CPUs != "" && cfg.CPUs == nil {
		cfg.CPUs, _ = cgroup.ParseCPUs(h.CPUs)
	}
	// A VM guest's network stack cannot be entered from here: its kernel answers ICMP echoes,
	// its agent serves the UDP responder (probe.Echoer), and the XDP reflector cannot be
	// attached there.
	var guest probe.Echoer
	if dn, err := env.Node(dests[0]); err == nil {
		if g, ok := probe.InGuest(dn); ok {
			if guest, ok = g.(probe.Echoer); !ok {
				return fmt.Errorf("run rtt on chain %s: destination %s is a guest that serves no echo", c.Name, dests[0])
			}
		}
	}
	if cfg.XDP() && guest != nil && cfg.Method == echo.MethodXDP {
		return fmt.Errorf("run rtt (xdp) on chain %s: %w", c.Name, ErrXDPGuest)
	}
	what := fmt.Sprintf("run rtt (%s) from %s to %s", cfg.Protocol, c.Path[0], dest)
	src, err := env.Node(c.Path[0])
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// A VM guest source: the guest's agent sends the echoes (echo.Guest) from the guest's
	// stack, with the same socket path, timed by the guest's clock; neither the XDP generator
	// nor the tc path ends can be attached there from the host.
	var sg echo.Guest
	if g, ok := probe.InGuest(src); ok {
		if sg, ok = g.(echo.Guest); !ok {
			return fmt.Errorf("run rtt on chain %s: source %s is a guest that sends no echoes", c.Name, c.Path[0])
		}
		cfg.CPUs = nil // the host's cores mean nothing in the guest
		if cfg.PathEnd == echo.PathEndTC {
			return fmt.Errorf("%s with path_end tc: %w", what, ErrTCGuestSource)
		}
	}
	var fallback string
	switch {
	case cfg.XDP() && sg != nil:
		if cfg.Method == echo.MethodXDP {
			return fmt.Errorf("run rtt (xdp) on chain %s: %w", c.Name, ErrXDPGuestSource)
		}
		fallback = ErrXDPGuestSource.Error()
	case cfg.XDP() && guest != nil:
		fallback = ErrXDPGuest.Error()
	case cfg.XDP():
		err := runXDP(ctx, env, cfg, emit)
		if err == nil || cfg.Method == echo.MethodXDP || !errors.Is(err, pktgen.ErrUnsupported) {
			if err != nil {
				return fmt.Errorf("run rtt (xdp) from %s: %w", c.Path[0], err)
			}
			return nil
		}
		fallback = err.Error()
	}
	if fallback != "" {
		inner := emit
		emit = func(s results.Sample) {
			if s.Labels == nil {
				s.Labels = map[string]string{}
			}
			s.Labels["method"], s.Labels["fallback_reason"] = echo.MethodSocket, fallback
			inner(s)
		}
	}
	if sg != nil {
		// Every timestamp of the run was taken by the guest's clock (an emulated one under
		// TCG); the samples themselves are dated by the host when they return.
		inner := emit
		emit = func(s results.Sample) {
			if s.Labels == nil {
				s.Labels = map[string]string{}
			}
			s.Labels["clock"] = GuestClock
			inner(s)
		}
	}
	if cfg.Protocol == echo.ProtoUDP {
		dn, err := env.Node(dests[0])
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		var resp io.Closer
		if guest != nil {
			network := "udp4"
			if dest.Is6() {
				network = "udp6"
			}
			resp, err = guest.ListenEcho(ctx, network, net.JoinHostPort("", strconv.Itoa(int(cfg.Port))))
		} else {
			resp, err = StartResponder(dn, cfg.Port, dest.Is6())
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		defer resp.Close()
	}
	target := netip.AddrPortFrom(dest, cfg.Port)
	measure := func(ctx context.Context, cfg Config) (*Result, error) { return measurePathEnd(ctx, src, target, cfg) }
	if sg != nil {
		measure = func(ctx context.Context, cfg Config) (*Result, error) { return measureGuest(ctx, sg, target, cfg) }
	}
	if err := warm(ctx, measure, cfg); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	runs, err := measureAttempts(ctx, cfg.Attempts, func(ctx context.Context) (*Result, error) {
		rctx, cancel := context.WithTimeout(ctx, cfg.Bound())
		defer cancel()
		return measure(rctx, cfg)
	})
	for _, s := range AttemptSamples(cfg.Attempts, runs) {
		emit(s)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
