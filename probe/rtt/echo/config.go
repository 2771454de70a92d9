// Package echo is the rtt probe's measuring path: fixed-size ICMP or UDP echoes at a rate,
// paced on locked threads, four timestamps each (user space and the kernel's software
// SO_TIMESTAMPING ones), merged into a Result. It imports nothing of sfclab, so that a VM
// guest's agent (runtime/vm, linked alone into sfclab-guest) sends a VM source's echoes with
// the same code the probe (package rtt) runs in a namespace, as tcprtt/exchange and
// ndr/count do for their probes.
package echo

import (
	"errors"
	"fmt"
	"time"
)

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

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config {
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
	c = c.WithDefaults()
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
	c = c.WithDefaults()
	send := c.Duration
	if c.Rate != Max && (send == 0 || float64(c.Count)/c.Rate < send.Seconds()) {
		send = time.Duration(float64(c.Count) / c.Rate * float64(time.Second))
	}
	if send == 0 { // a flood by count: at worst floodRelease per echo
		send = time.Duration(c.Count) * floodRelease / time.Duration(c.Window)
	}
	return 2*send + c.Timeout + 5*time.Second
}

// XDP reports whether the configuration selects MethodXDP.
func (c Config) XDP() bool {
	return c.Method == MethodXDP || (c.Method == "" && c.Rate != Max && c.Rate >= HighRateFrom)
}
