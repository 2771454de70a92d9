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
	"github.com/sfclab/sfclab/results"
)

// Name is the probe's name in samples.
const Name = "rtt"

// Protocols.
const (
	ProtoICMP = "icmp"
	ProtoUDP  = "udp"
)

// Methods: how echoes are sent (Config.Method).
const (
	// MethodSocket sends each echo from a socket, four timestamps each (this package's
	// measure path): up to some tens of Kpps on a loaded machine.
	MethodSocket = "socket"
	// MethodXDP sends 64-byte UDP frames from pktgen's XDP live-frame generator, a timestamp
	// in every SampleEvery-th, bounced by an XDP reflector at the destination (RunHighRate):
	// study D's 1 Mpps.
	MethodXDP = "xdp"
	// MethodXDPName is MethodXDP's value of the samples' method label.
	MethodXDPName = "xdp-reflector"
	// HighRateFrom is the rate (packets/s) from which the default method (Method unset) is
	// MethodXDP: the socket path sent 54-78 Kpps when asked for 1 Mpps on this project's
	// 2-core development host (issue 25), so at 100 Kpps and above it cannot keep the rate.
	HighRateFrom = 100_000
)

// Max as a rate asks for a flood: the next echo leaves when the previous ones came back
// (Window outstanding) or 10 ms passed, as ping -f.
const Max = -1.0

// Limits.
const (
	// MaxCount bounds the echoes of one run (and the memory for their timestamps: 40 B each).
	MaxCount = 10_000_000
	// MaxRate bounds a requested rate (packets/s).
	MaxRate = 10_000_000
	// MaxDuration bounds a run's sending time.
	MaxDuration = time.Hour
	// DefaultPort is the UDP responder's port: the echo service's (RFC 862).
	DefaultPort = 7
)

// Errors.
var (
	// ErrConfig is wrapped by every invalid configuration.
	ErrConfig = errors.New("invalid rtt probe configuration")
	// ErrProtocol is returned for a protocol other than icmp or udp.
	ErrProtocol = errors.New("protocol is not icmp or udp")
	// ErrXDPGuest is why MethodXDP does not run to a VM guest destination.
	ErrXDPGuest = errors.New("the destination is a VM guest, where the XDP reflector cannot be attached from the host (its network stack is the guest's kernel's): use method socket")
	// ErrICMPv6 is returned for an ICMP probe to an IPv6 address (not supported yet; use udp).
	ErrICMPv6 = errors.New("icmp echo over IPv6 is not supported; use protocol udp")
)

// Config is one run of the probe.
type Config struct {
	// Protocol is "icmp" (default) or "udp".
	Protocol string
	// Size is the echo message above IP in bytes — ICMP header and payload, or UDP header and
	// payload; 0 means 64 (ping's default: -s 56). At least MinSize.
	Size int
	// Rate is packets per second; 0 means 1000; Max means a flood.
	Rate float64
	// Count is the number of echoes; 0 means 1000, or Rate*Duration when Duration is set
	// (1,000,000 for a flood with a Duration).
	Count int
	// Duration, when set, stops sending after this long even if Count echoes were not sent.
	Duration time.Duration
	// Timeout is how long replies are awaited after the last send; 0 means 1 s.
	Timeout time.Duration
	// Window is how many echoes a flood keeps outstanding; 0 means 1 (ping -f).
	Window int
	// Port is the UDP responder's port; 0 means DefaultPort.
	Port uint16
	// Attempts, above 1, repeats the run until every echo came back, at most Attempts runs
	// (study D's "repeated until all packets were successfully transmitted"; see
	// measureAttempts): every attempt is kept in the samples. 0 or 1: one run.
	Attempts int
	// PathEnd is where an echo's path starts and ends: PathEndTC (tc programs at the sender's
	// interface: the same points for every driver), PathEndSocket (the socket's timestamps),
	// or "" for tc where the kernel can, else the socket's (the samples say which).
	PathEnd string
	// Busy makes the probe's thread look for replies between echoes without ever sleeping,
	// as ping does at short intervals: its CPU stays awake, which shortens stack_tx, at the
	// cost of a whole core.
	Busy bool
	// Method is MethodSocket, MethodXDP, or "" (the default): MethodXDP at rates of
	// HighRateFrom and above, MethodSocket below and for a flood (Max). Where the default
	// chose MethodXDP and it cannot run here, the socket path runs instead and every sample
	// says why (label fallback_reason); asked for explicitly, it is refused with the reason.
	// MethodXDP sends 64-byte frames (Size and Protocol are not used, the samples say
	// protocol=udp, frame=64), runs for Duration, else long enough to time Count echoes
	// at the rate it sends (Count x SampleEvery / rate, at most MaxEchoTime), and a rate above the generator's ceiling into the chain
	// is clamped to it (label rate_clamped_from).
	Method string
	// SampleEvery is, with MethodXDP, the share of frames timestamped: every n-th; 0 means
	// 1024.
	SampleEvery int
	// CPUs, when set, confine the probe's sending threads to these cores (and make at most one
	// thread per core of them): the
	// source node's emulated host's own (the runner sets them from the plan), so the probe
	// competes with that host's load as a ping inside the study's sender container did.
	CPUs []int `json:"-" yaml:"-"`
}

func (c Config) withDefaults() Config {
	if c.Protocol == "" {
		c.Protocol = ProtoICMP
	}
	if c.Size == 0 {
		c.Size = 64
	}
	if c.Rate == 0 {
		c.Rate = 1000
	}
	if c.Count == 0 {
		switch {
		case c.Duration > 0 && c.Rate == Max:
			c.Count = 1_000_000
		case c.Duration > 0:
			c.Count = int(c.Rate*c.Duration.Seconds() + 0.5)
		default:
			c.Count = 1000
		}
	}
	if c.Timeout == 0 {
		c.Timeout = time.Second
	}
	if c.Window == 0 {
		c.Window = 1
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	return c
}

// Validate checks a configuration (after defaults) and says what to change.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf("%w: "+f, append([]any{ErrConfig}, a...)...)) }
	if c.Protocol != ProtoICMP && c.Protocol != ProtoUDP {
		bad("protocol %q is not icmp or udp", c.Protocol)
	}
	if c.Size < MinSize || c.Size > MaxSize {
		bad("size %d must be %d-%d bytes", c.Size, MinSize, MaxSize)
	}
	if c.Rate != Max && (c.Rate < 1 || c.Rate > MaxRate) {
		bad("rate %g must be 1-%d packets/s or max", c.Rate, MaxRate)
	}
	if c.Count < 1 || c.Count > MaxCount {
		bad("count %d must be 1-%d", c.Count, MaxCount)
	}
	if c.Duration < 0 || c.Duration > MaxDuration {
		bad("duration %s must be at most %s", c.Duration, MaxDuration)
	}
	if c.Timeout < 0 || c.Timeout > time.Minute {
		bad("timeout %s must be at most 1m", c.Timeout)
	}
	if c.PathEnd != "" && c.PathEnd != PathEndTC && c.PathEnd != PathEndSocket {
		bad("path_end %q is not tc or socket", c.PathEnd)
	}
	if c.Method != "" && c.Method != MethodSocket && c.Method != MethodXDP {
		bad("method %q is not socket or xdp", c.Method)
	}
	if c.SampleEvery < 0 || c.SampleEvery > 1<<20 {
		bad("sample_every %d must be 0-%d", c.SampleEvery, 1<<20)
	}
	if c.Attempts < 0 || c.Attempts > MaxAttempts {
		bad("attempts %d must be 0-%d (0 or 1: one run; more: repeat until every echo came back, at most that many runs)", c.Attempts, MaxAttempts)
	}
	if c.Window < 1 || c.Window > 65536 {
		bad("window %d must be 1-65536", c.Window)
	}
	return errors.Join(errs...)
}

// Bound is the longest a run may take: its sending time at the requested rate (or Duration)
// plus Timeout, with a margin for a slow machine.
func (c Config) Bound() time.Duration {
	c = c.withDefaults()
	send := c.Duration
	if c.Rate != Max && (send == 0 || float64(c.Count)/c.Rate < send.Seconds()) {
		send = time.Duration(float64(c.Count) / c.Rate * float64(time.Second))
	}
	if send == 0 { // a flood by count: at worst floodRelease per echo
		send = time.Duration(c.Count) * floodRelease / time.Duration(c.Window)
	}
	return 2*send + c.Timeout + 5*time.Second
}

// WarmTime bounds Warm.
const WarmTime = 3 * time.Second

// Warm sends single echoes 10 ms apart until one comes back or WarmTime passed, so that the
// measured run does not pay for what only the first packets pay: neighbour resolution, and a
// freshly deployed link's qdisc, which the kernel attaches up to a second after the link came
// up (until then packets are dropped). No reply is not an error: a chain may have no echo path.
func Warm(ctx context.Context, src Doer, dst netip.AddrPort, cfg Config) error {
	cfg = cfg.withDefaults()
	cfg.Count, cfg.Rate, cfg.Duration, cfg.Timeout = 1, 1, 0, 10*time.Millisecond
	deadline := time.Now().Add(WarmTime)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r, err := Measure(ctx, src, dst, cfg)
		if err != nil {
			return fmt.Errorf("warm up: %w", err)
		}
		if r.Received > 0 {
			return nil
		}
	}
	return ctx.Err()
}

// xdp reports whether the configuration selects MethodXDP.
func (c Config) xdp() bool {
	return c.Method == MethodXDP || (c.Method == "" && c.Rate != Max && c.Rate >= HighRateFrom)
}

// runXDP runs MethodXDP on the chain, samples labelled as the socket path's (protocol, size,
// rate).
func runXDP(ctx context.Context, env probe.Env, cfg Config, emit func(results.Sample)) error {
	h := HighRate{Rate: cfg.Rate, Duration: cfg.Duration, SampleEvery: cfg.SampleEvery, CPUs: cfg.CPUs}
	if cfg.Duration == 0 {
		h.Duration, h.Echoes = MaxEchoTime, cfg.Count
	}
	h.Labels = map[string]string{"protocol": ProtoUDP, "size": "26", "rate": RateLabel(cfg.Rate)}
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
	cfg := p.cfg.withDefaults()
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
	var fallback string
	if cfg.xdp() && guest != nil {
		if cfg.Method == MethodXDP {
			return fmt.Errorf("run rtt (xdp) on chain %s: %w", c.Name, ErrXDPGuest)
		}
		fallback = ErrXDPGuest.Error()
	} else if cfg.xdp() {
		err := runXDP(ctx, env, cfg, emit)
		if err == nil || cfg.Method == MethodXDP || !errors.Is(err, pktgen.ErrUnsupported) {
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
			s.Labels["method"], s.Labels["fallback_reason"] = MethodSocket, fallback
			inner(s)
		}
	}
	what := fmt.Sprintf("run rtt (%s) from %s to %s", cfg.Protocol, c.Path[0], dest)
	src, err := env.Node(c.Path[0])
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if cfg.Protocol == ProtoUDP {
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
	if err := Warm(ctx, src, target, cfg); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	runs, err := measureAttempts(ctx, cfg.Attempts, func(ctx context.Context) (*Result, error) {
		rctx, cancel := context.WithTimeout(ctx, cfg.Bound())
		defer cancel()
		return measurePathEnd(rctx, src, target, cfg)
	})
	for _, s := range AttemptSamples(cfg.Attempts, runs) {
		emit(s)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
