package l4lb

import (
	"time"

	"github.com/sfclab/sfclab/spec"
)

// Kind is the kind's name in a lab file (the register, vnf/kinds, maps it to this package).
const Kind = "l4lb"

// L4LB implementations.
const (
	ImplHAProxy = "haproxy"
	ImplNft     = "nft"
	// ImplSfclab is sfclab's own TCP-terminating balancer (package lb, `sfclab lb`).
	ImplSfclab = "sfclab"
)

// L4LBParams are the parameters of an L4 load balancer over the chain's destination instances.
type L4LBParams struct {
	// Impl is "haproxy" (TCP proxy in user space, default), "sfclab" (sfclab's own TCP proxy,
	// splice(2) between sockets) or "nft" (kernel DNAT by hash).
	Impl string `yaml:"impl,omitempty" json:"impl"`
	// Protocol is "tcp" (default) or "udp" (nft only).
	Protocol string `yaml:"protocol,omitempty" json:"protocol"`
	// Port the balancer listens on; default the chain classifier's single destination port.
	Port uint16 `yaml:"port,omitempty" json:"port"`
	// BackendPort is the port on the backends; default Port.
	BackendPort uint16 `yaml:"backend_port,omitempty" json:"backend_port"`
	// Balance is the algorithm: haproxy and sfclab "source" (default), "roundrobin", "leastconn"
	// (all weighted by the destination's weights);
	// nft "source" (default, hash of the source address) or "flow" (hash of the 5-tuple).
	Balance string `yaml:"balance,omitempty" json:"balance"`
	// Splice turns on HAProxy's splice-request and splice-response (default true).
	Splice *bool `yaml:"splice,omitempty" json:"splice,omitempty"`
	// Threads is HAProxy's nbthread; 0 (the default) leaves it unset, so HAProxy runs as
	// with its defaults: one thread per CPU it may run on.
	Threads int `yaml:"threads,omitempty" json:"threads"`
	// MaxConn is HAProxy's maxconn (default 4096).
	MaxConn int `yaml:"maxconn,omitempty" json:"maxconn"`
	// Seed is the nft jhash seed (default 0x5fc1ab), fixed so spreading is reproducible.
	Seed uint32 `yaml:"seed,omitempty" json:"seed"`
	// CheckInterval turns on TCP-connect health checks of the backends at this period, e.g.
	// "2s" (HAProxy `check inter`); default off. haproxy and sfclab.
	CheckInterval string `yaml:"check_interval,omitempty" json:"check_interval,omitempty"`
	// Rise good checks in a row bring a backend back (default 2), Fall bad ones take it out
	// (default 3), as HAProxy's rise and fall.
	Rise int `yaml:"rise,omitempty" json:"rise,omitempty"`
	Fall int `yaml:"fall,omitempty" json:"fall,omitempty"`
	// TimeoutClient closes a client connection idle this long (HAProxy `timeout client`,
	// default "10m").
	TimeoutClient string `yaml:"timeout_client,omitempty" json:"timeout_client,omitempty"`
	// TimeoutConnect bounds a connect to a backend (HAProxy `timeout connect`, default "5s").
	TimeoutConnect string `yaml:"timeout_connect,omitempty" json:"timeout_connect,omitempty"`
	// Drain is how long destroying the lab waits for open connections (sfclab, default "2s").
	Drain string `yaml:"drain,omitempty" json:"drain,omitempty"`
	// Loop is sfclab's data path: "goroutines" (the default and only one, two per connection on
	// Go's netpoller, threads default 1; the epoll loop was removed, measured not better).
	Loop string `yaml:"loop,omitempty" json:"loop,omitempty"`
	// Accel is how impl sfclab moves bytes between a connection's sockets: "splice" (default,
	// splice(2) through a pipe) or "sockmap" (an eBPF sk_skb program redirects them in the
	// kernel; loop goroutines only, needs BPF).
	Accel string `yaml:"accel,omitempty" json:"accel,omitempty"`
}

// LoopGoroutines is impl sfclab's data path (the l4lb loop parameter).
const LoopGoroutines = "goroutines"

// Byte movers of impl sfclab (the l4lb accel parameter).
const (
	AccelSplice  = "splice"
	AccelSockmap = "sockmap"
)

// L4LB defaults that are not filled into the parameters (so plans written before they
// existed stay the same).
const (
	DefaultRise           = 2
	DefaultFall           = 3
	DefaultTimeoutClient  = 10 * time.Minute
	DefaultTimeoutConnect = 5 * time.Second
	DefaultDrain          = 2 * time.Second
)

// Durations returns the check interval (0: checks off), the client and connect timeouts and
// the drain time, defaults applied; validation has checked they parse.
func (p *L4LBParams) Durations() (check, client, connect, drain time.Duration) {
	parse := func(s string, def time.Duration) time.Duration {
		if d, err := time.ParseDuration(s); err == nil && s != "" {
			return d
		}
		return def
	}
	return parse(p.CheckInterval, 0), parse(p.TimeoutClient, DefaultTimeoutClient),
		parse(p.TimeoutConnect, DefaultTimeoutConnect), parse(p.Drain, DefaultDrain)
}

// RiseFall returns rise and fall, defaults applied.
func (p *L4LBParams) RiseFall() (rise, fall int) {
	rise, fall = p.Rise, p.Fall
	if rise == 0 {
		rise = DefaultRise
	}
	if fall == 0 {
		fall = DefaultFall
	}
	return rise, fall
}

// ListenPort is the balancer's port, 0 for the chain's single destination port (Proxy).
func (p *L4LBParams) ListenPort() uint16 { return p.Port }

// ConnectPort is backend_port, else the balancer's own port: an L4 balancer passes the port
// through (Proxy).
func (p *L4LBParams) ConnectPort(listen, _ uint16) uint16 {
	if p.BackendPort != 0 {
		return p.BackendPort
	}
	return listen
}

// BalancerName is the implementation as the report names it (spec.Balancer; the values of
// report.Balancer*): impl, with haproxy split by splicing into "haproxy" and "haproxy-splice".
func (p *L4LBParams) BalancerName() string {
	if p.Impl == ImplHAProxy && p.SpliceOn() {
		return ImplHAProxy + "-splice"
	}
	return p.Impl
}

// SpliceOn reports whether HAProxy splicing is on (the default).
func (p *L4LBParams) SpliceOn() bool { return p.Splice == nil || *p.Splice }

// SetDefaults fills in impl (haproxy), protocol (tcp), balance (source), maxconn (4096) and
// the nft hash seed.
func (p *L4LBParams) SetDefaults() {
	if p.Impl == "" {
		p.Impl = ImplHAProxy
	}
	if p.Protocol == "" {
		p.Protocol = "tcp"
	}
	if p.Balance == "" {
		p.Balance = "source"
	}
	if p.MaxConn == 0 {
		p.MaxConn = 4096
	}
	if p.Seed == 0 {
		p.Seed = 0x5fc1ab
	}
}

// Check checks the implementation and what it supports: balance algorithms, durations, rise
// and fall, threads, maxconn; and that the balancer has one instance.
func (p *L4LBParams) Check(fn *spec.Function, pr *spec.Problems) {
	pr.OneOf("impl", p.Impl, ImplHAProxy, ImplSfclab, ImplNft)
	pr.OneOf("protocol", p.Protocol, "tcp", "udp")
	if p.Impl == ImplHAProxy || p.Impl == ImplSfclab {
		pr.OneOf("balance", p.Balance, "source", "roundrobin", "leastconn")
		if p.Protocol != "tcp" {
			pr.Addf("impl %s balances tcp only; use impl: nft for udp", p.Impl)
		}
		for _, d := range []struct{ name, v string }{{"check_interval", p.CheckInterval},
			{"timeout_client", p.TimeoutClient}, {"timeout_connect", p.TimeoutConnect}, {"drain", p.Drain}} {
			if v, err := time.ParseDuration(d.v); d.v != "" && (err != nil || v <= 0) {
				pr.Addf("%s %q is not a positive duration (e.g. 500ms, 2s, 10m)", d.name, d.v)
			}
		}
		if p.Rise < 0 || p.Rise > 100 || p.Fall < 0 || p.Fall > 100 {
			pr.Addf("rise and fall must be 1-100")
		}
		if p.Threads < 0 || p.Threads > 64 {
			pr.Addf("threads must be 1-64, or 0 or left out for HAProxy's default (one per CPU), got %d", p.Threads)
		}
	} else {
		pr.OneOf("balance", p.Balance, "source", "flow")
	}
	if p.Loop != "" {
		if p.Impl != ImplSfclab {
			pr.Addf("loop is a parameter of impl sfclab, not %s", p.Impl)
		}
		if p.Loop == "epoll" {
			pr.Addf("loop epoll was removed (measured not better than goroutines, docs/sfclab-lb.md); leave loop out")
		} else {
			pr.OneOf("loop", p.Loop, LoopGoroutines)
		}
	}
	if p.Accel != "" {
		if p.Impl != ImplSfclab {
			pr.Addf("accel is a parameter of impl sfclab, not %s", p.Impl)
		}
		pr.OneOf("accel", p.Accel, AccelSplice, AccelSockmap)
	}
	if p.MaxConn < 1 {
		pr.Addf("maxconn must be positive, got %d", p.MaxConn)
	}
	if fn.Instances > 1 {
		pr.Addf("an l4lb is the service address of its chain; routed steering supports one instance")
	}
}
