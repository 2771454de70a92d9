package spec

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Function kinds.
const (
	KindForwarder = "forwarder"
	KindFirewall  = "firewall"
	KindNAT       = "nat"
	KindL4LB      = "l4lb"
	KindCustom    = "custom"
	KindHTTPProxy = "http-proxy"
)

// Firewall backends.
const (
	BackendNftables = "nftables"
	BackendIptables = "iptables"
)

// ForwarderParams are the parameters of a forwarder: a plain L3 router.
type ForwarderParams struct {
	// Datapath is how a forwarder in a transparent lab forwards: "bpf" (default there: a tc
	// program at its ingress port hands each packet back to the host side, no IP stack) or
	// "kernel" (the kernel's IP forwarding, as a VM or a container forwards: study C's VNFs).
	// A routed lab's forwarders always forward by the kernel.
	Datapath string `yaml:"datapath,omitempty" json:"datapath,omitempty"`
}

// Forwarder datapaths.
const (
	DatapathBPF    = "bpf"
	DatapathKernel = "kernel"
)

// Check checks the datapath.
func (p *ForwarderParams) Check(fn *Function, pr *Problems) {
	if p.Datapath != "" {
		pr.OneOf("datapath", p.Datapath, DatapathBPF, DatapathKernel)
	}
}

// FirewallParams are the parameters of a stateful firewall: established and related traffic
// is accepted, then the rules apply in order, then the policy.
type FirewallParams struct {
	// Backend is "nftables" (default) or "iptables" (as study A used).
	Backend string `yaml:"backend,omitempty" json:"backend"`
	// Policy for forwarded packets no rule matched: "accept" (default) or "drop".
	Policy string `yaml:"policy,omitempty" json:"policy"`
	// Masquerade rewrites the source address of forwarded traffic to the egress address.
	Masquerade bool `yaml:"masquerade,omitempty" json:"masquerade,omitempty"`
	// Rules are tried in order on new connections.
	Rules []FirewallRule `yaml:"rules,omitempty" json:"rules,omitempty"`
	// Offload is how a firewall in a transparent lab forwards the packets of flows it has let
	// through: "bpf" (default there: a tc program at its ingress ports hands packets of
	// conntrack entries established both ways on, skipping the IP stack, conntrack and the
	// ruleset, as an nftables flowtable does) or "none" (every packet through the kernel). A
	// routed lab's firewalls always forward by the kernel.
	Offload string `yaml:"offload,omitempty" json:"offload,omitempty"`
}

// Firewall offloads.
const (
	OffloadBPF  = "bpf"
	OffloadNone = "none"
)

// FirewallRule allows, denies (drops) or rejects matching new connections.
type FirewallRule struct {
	// Action is "allow", "deny" (drop silently) or "reject".
	Action string `yaml:"action" json:"action"`
	// Protocol is "tcp", "udp", "icmp" or "" / "any".
	Protocol string `yaml:"protocol,omitempty" json:"protocol,omitempty"`
	// Source and Destination are CIDR prefixes or addresses (IPv6 too in a transparent lab,
	// whose ports are dual-stack; source and destination of one family).
	Source      string `yaml:"source,omitempty" json:"source,omitempty"`
	Destination string `yaml:"destination,omitempty" json:"destination,omitempty"`
	// Port is the destination port or range; SourcePort the source port or range.
	Port       PortRange `yaml:"port,omitempty" json:"port,omitempty"`
	SourcePort PortRange `yaml:"source_port,omitempty" json:"source_port,omitempty"`
}

// NATParams are the parameters of a NAT function on its own.
type NATParams struct {
	// Backend is "nftables" (default) or "iptables".
	Backend string `yaml:"backend,omitempty" json:"backend"`
	// Masquerade rewrites sources to the egress address.
	Masquerade bool `yaml:"masquerade,omitempty" json:"masquerade,omitempty"`
	// SNAT rewrites sources to this address (instead of masquerade).
	SNAT string `yaml:"snat,omitempty" json:"snat,omitempty"`
	// DNAT rewrites destinations of matching traffic.
	DNAT []DNATRule `yaml:"dnat,omitempty" json:"dnat,omitempty"`
}

// DNATRule sends traffic for one port of the function to another address.
type DNATRule struct {
	// Protocol is "tcp" or "udp".
	Protocol string `yaml:"protocol" json:"protocol"`
	// Port is the destination port matched (on any address the function receives).
	Port uint16 `yaml:"port" json:"port"`
	// To is an endpoint name (its first instance's address in this chain) or an address.
	To string `yaml:"to" json:"to"`
	// ToPort is the new destination port; default Port.
	ToPort uint16 `yaml:"to_port,omitempty" json:"to_port,omitempty"`
}

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
	// Loop is sfclab's data path: "goroutines" (default, two per connection on Go's netpoller,
	// threads default 1) or "epoll" (an edge-triggered epoll loop per thread, threads default
	// one per core).
	Loop string `yaml:"loop,omitempty" json:"loop,omitempty"`
	// Accel is how impl sfclab moves bytes between a connection's sockets: "splice" (default,
	// splice(2) through a pipe) or "sockmap" (an eBPF sk_skb program redirects them in the
	// kernel; loop goroutines only, needs BPF).
	Accel string `yaml:"accel,omitempty" json:"accel,omitempty"`
}

// Data paths of impl sfclab (the l4lb loop parameter).
const (
	LoopGoroutines = "goroutines"
	LoopEpoll      = "epoll"
)

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

// SpliceOn reports whether HAProxy splicing is on (the default).
func (p *L4LBParams) SpliceOn() bool { return p.Splice == nil || *p.Splice }

// CustomParams are the parameters of a custom function: any commands in the node.
type CustomParams struct {
	// Setup commands run once, in order, and must exit 0.
	Setup []string `yaml:"setup,omitempty" json:"setup,omitempty"`
	// Run commands are started and kept running for the life of the lab.
	Run []string `yaml:"run,omitempty" json:"run,omitempty"`
	// Teardown commands run when the lab is destroyed (errors are reported, not fatal).
	Teardown []string `yaml:"teardown,omitempty" json:"teardown,omitempty"`
	// Forward turns IP forwarding on in the node (default true).
	Forward *bool `yaml:"forward,omitempty" json:"forward,omitempty"`
	// Requires lists programs that must be installed on the host.
	Requires []string `yaml:"requires,omitempty" json:"requires,omitempty"`
}

// HTTPProxyParams are the parameters of an HTTP forward proxy (Squid), with its cache off or on.
type HTTPProxyParams struct {
	// Port the proxy listens on (default 3128).
	Port uint16 `yaml:"port,omitempty" json:"port"`
	// Cache turns the cache on (default off: forwarding only).
	Cache bool `yaml:"cache,omitempty" json:"cache"`
	// CacheMem is Squid's cache_mem in MB (default 256).
	CacheMem int `yaml:"cache_mem_mb,omitempty" json:"cache_mem_mb"`
	// CacheDir is the size of an on-disk cache in MB (default 0: memory only).
	CacheDir int `yaml:"cache_dir_mb,omitempty" json:"cache_dir_mb"`
	// MaxObject is the largest object cached, in MB (default 16).
	MaxObject int `yaml:"maximum_object_size_mb,omitempty" json:"maximum_object_size_mb"`
	// Policy is the replacement policy: "lru" (default), "heap LFUDA", "heap GDSF", "heap LRU".
	Policy string `yaml:"policy,omitempty" json:"policy"`
	// Workers is Squid's SMP workers (default 1).
	Workers int `yaml:"workers,omitempty" json:"workers"`
}

// ListenPort is the proxy's port (Proxy).
func (p *HTTPProxyParams) ListenPort() uint16 { return p.Port }

// ConnectPort is the origin's own port, else 80: an HTTP proxy connects to where the origin
// listens, whatever port it listens on itself (Proxy).
func (p *HTTPProxyParams) ConnectPort(_, backendListens uint16) uint16 {
	if backendListens != 0 {
		return backendListens
	}
	return 80
}

// DNATRules are the rules whose targets the plan resolves (Rewriter).
func (p *NATParams) DNATRules() []DNATRule { return p.DNAT }

// ForwardsIP is forward:, when set (IPForwarding).
func (p *CustomParams) ForwardsIP() (forward, set bool) {
	if p.Forward == nil {
		return false, false
	}
	return *p.Forward, true
}

// HTTP servers an http-server endpoint can run.
const (
	ServerApache = "apache"
	ServerNginx  = "nginx"
)

// HTTPServer are the parameters of an http-server endpoint: an origin serving objects of
// chosen sizes.
type HTTPServer struct {
	// Server is "apache" (default, as study B) or "nginx".
	Server string `yaml:"server,omitempty" json:"server"`
	// Port is the HTTP port (default 80).
	Port uint16 `yaml:"port,omitempty" json:"port"`
	// Objects are the sizes served, e.g. 1k, 10k, 100k, 1M, 10M (k = 1024 bytes), each at
	// /obj-SIZE (default: the five sizes of study B).
	Objects []string `yaml:"objects,omitempty" json:"objects"`
}

// ListenPort is the server's HTTP port (Listener).
func (p *HTTPServer) ListenPort() uint16 { return p.Port }

// MaxObjectSize is the largest object an http-server makes.
const MaxObjectSize = 1 << 30

// ParseSize parses an object size: a number with an optional k, M or G suffix (powers of 1024).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	switch {
	case strings.HasSuffix(t, "k"), strings.HasSuffix(t, "K"):
		mult, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "M"):
		mult, t = 1<<20, t[:len(t)-1]
	case strings.HasSuffix(t, "G"):
		mult, t = 1<<30, t[:len(t)-1]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("object size %q is not a size like 1k, 100k, 10M", s)
	}
	if n*mult > MaxObjectSize {
		return 0, fmt.Errorf("object size %q is over the %d MiB an http-server makes", s, MaxObjectSize>>20)
	}
	return n * mult, nil
}

// ObjectPath is the URL path of an object of the given size name.
func ObjectPath(size string) string { return "/obj-" + size }

// ParsePrefix parses an IPv4 CIDR prefix or a bare address (as a /32).
func ParsePrefix(s string) (netip.Prefix, error) {
	p, err := ParseAnyPrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%q is not IPv4 (sfclab labs are IPv4)", s)
	}
	return p, nil
}

// ParseAnyPrefix is ParsePrefix for either family: a firewall rule's address in a transparent
// (dual-stack) lab may be IPv6.
func ParseAnyPrefix(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q has a zone; give the address alone", s)
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix like 198.18.0.0/24", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set; did you mean %s?", s, p.Masked())
	}
	return p, nil
}

// The parameter types check themselves (ParamsDefaulter, ParamsChecker): validation asks the
// value it decoded, whatever its kind.

// SetDefaults fills in the firewall's backend (nftables) and policy (accept).
func (p *FirewallParams) SetDefaults() {
	if p.Backend == "" {
		p.Backend = BackendNftables
	}
	if p.Policy == "" {
		p.Policy = "accept"
	}
}

// Check checks the backend, the policy, the offload and every rule.
func (p *FirewallParams) Check(fn *Function, pr *Problems) {
	pr.OneOf("backend", p.Backend, BackendNftables, BackendIptables)
	pr.OneOf("policy", p.Policy, "accept", "drop")
	if p.Offload != "" {
		pr.OneOf("offload", p.Offload, OffloadBPF, OffloadNone)
	}
	for i, r := range p.Rules {
		what := fmt.Sprintf("rule %d", i+1)
		pr.OneOf(what+" action", r.Action, "allow", "deny", "reject")
		pr.Protocol(what, r.Protocol, r.Port, r.SourcePort)
		src := pr.AnyPrefix(what+" source", r.Source)
		dst := pr.AnyPrefix(what+" destination", r.Destination)
		if src.IsValid() && dst.IsValid() && src.Addr().Is4() != dst.Addr().Is4() {
			pr.Addf("%s: source %s and destination %s are of different IP versions; a packet has one: split the rule", what, r.Source, r.Destination)
		}
	}
}

// IPv6Rule returns the first rule (1-based) with an IPv6 source or destination, 0 if none:
// only a transparent lab's ports have IPv6.
func (p *FirewallParams) IPv6Rule() int {
	for i, r := range p.Rules {
		for _, s := range []string{r.Source, r.Destination} {
			if a, err := ParseAnyPrefix(s); err == nil && !a.Addr().Is4() {
				return i + 1
			}
		}
	}
	return 0
}

// SetDefaults fills in the backend (nftables) and each DNAT rule's to_port (its port).
func (p *NATParams) SetDefaults() {
	if p.Backend == "" {
		p.Backend = BackendNftables
	}
	for i := range p.DNAT {
		if p.DNAT[i].ToPort == 0 {
			p.DNAT[i].ToPort = p.DNAT[i].Port
		}
	}
}

// Check checks the backend, that the function rewrites something, and every DNAT rule.
func (p *NATParams) Check(fn *Function, pr *Problems) {
	pr.OneOf("backend", p.Backend, BackendNftables, BackendIptables)
	if p.SNAT != "" {
		if a, err := netip.ParseAddr(p.SNAT); err != nil || !a.Is4() {
			pr.Addf("snat %q is not an IPv4 address", p.SNAT)
		}
		if p.Masquerade {
			pr.Addf("snat and masquerade exclude each other; pick one")
		}
	}
	if !p.Masquerade && p.SNAT == "" && len(p.DNAT) == 0 {
		pr.Addf("a nat function needs masquerade, snat or dnat")
	}
	for i, d := range p.DNAT {
		what := fmt.Sprintf("dnat %d", i+1)
		pr.OneOf(what+" protocol", d.Protocol, "tcp", "udp")
		if d.Port == 0 {
			pr.Addf("%s needs a port (1-65535)", what)
		}
		if d.To == "" {
			pr.Addf("%s needs to: an endpoint name or an address", what)
		}
	}
}

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
func (p *L4LBParams) Check(fn *Function, pr *Problems) {
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
		pr.OneOf("loop", p.Loop, LoopGoroutines, LoopEpoll)
	}
	if p.Accel != "" {
		if p.Impl != ImplSfclab {
			pr.Addf("accel is a parameter of impl sfclab, not %s", p.Impl)
		}
		pr.OneOf("accel", p.Accel, AccelSplice, AccelSockmap)
		if p.Accel == AccelSockmap && p.Loop == LoopEpoll {
			pr.Addf("accel sockmap works with loop goroutines, not epoll")
		}
	}
	if p.MaxConn < 1 {
		pr.Addf("maxconn must be positive, got %d", p.MaxConn)
	}
	if fn.Instances > 1 {
		pr.Addf("an l4lb is the service address of its chain; routed steering supports one instance")
	}
}

// Check checks that the function runs something.
func (p *CustomParams) Check(fn *Function, pr *Problems) {
	if len(p.Setup)+len(p.Run) == 0 {
		pr.Addf("a custom function needs setup or run commands")
	}
}

// SetDefaults fills in port 3128, cache_mem 256 MB, maximum_object_size 16 MB, policy lru
// and one worker.
func (p *HTTPProxyParams) SetDefaults() {
	if p.Port == 0 {
		p.Port = 3128
	}
	if p.CacheMem == 0 {
		p.CacheMem = 256
	}
	if p.MaxObject == 0 {
		p.MaxObject = 16
	}
	if p.Policy == "" {
		p.Policy = "lru"
	}
	if p.Workers == 0 {
		p.Workers = 1
	}
}

// Check checks the policy, the cache sizes, the workers and that the proxy has one instance.
func (p *HTTPProxyParams) Check(fn *Function, pr *Problems) {
	pr.OneOf("policy", p.Policy, "lru", "heap LFUDA", "heap GDSF", "heap LRU")
	if p.CacheMem < 1 || p.CacheDir < 0 || p.MaxObject < 1 {
		pr.Addf("cache_mem_mb and maximum_object_size_mb must be positive, cache_dir_mb not negative")
	}
	if p.Workers < 1 || p.Workers > 32 {
		pr.Addf("workers must be 1-32, got %d", p.Workers)
	}
	if fn.Instances > 1 {
		pr.Addf("an http-proxy is the service address of its chain; routed steering supports one instance")
	}
}

// SetDefaults fills in apache on port 80 serving the five object sizes of study B.
func (p *HTTPServer) SetDefaults() {
	if p.Server == "" {
		p.Server = ServerApache
	}
	if p.Port == 0 {
		p.Port = 80
	}
	if len(p.Objects) == 0 {
		p.Objects = []string{"1k", "10k", "100k", "1M", "10M"}
	}
}
