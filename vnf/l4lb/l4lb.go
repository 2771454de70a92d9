// Package l4lb is the L4 load balancer over the chain destination's instances: HAProxy in TCP
// mode (a user-space proxy that terminates every connection, as study A used), sfclab's own
// terminating proxy (package lb, splice(2) between the sockets) or nftables DNAT spreading
// flows by a seeded hash in the kernel (never terminating TCP).
package l4lb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/vnf"
)

// NftTable is the table the nft implementation creates in its node.
const NftTable = "sfclab_lb"

// ReadyTimeout bounds the wait for HAProxy to accept connections.
const ReadyTimeout = 5 * time.Second

// LB implements vnf.Function.
type LB struct{}

func params(f *plan.Function) *L4LBParams { return f.Params.(*L4LBParams) }

// NewParams returns the kind's empty parameters (L4LBParams) for the decoder.
func (LB) NewParams() any { return &L4LBParams{} }

// Requires lists haproxy or nft, by implementation (sfclab's balancer is sfclab itself).
func (LB) Requires(f *plan.Function) []string {
	switch params(f).Impl {
	case ImplNft:
		return []string{"nft"}
	case ImplSfclab:
		return nil
	}
	return []string{"haproxy"}
}

// RunsSfclab is true for impl sfclab: a container runtime mounts sfclab into the node.
func (LB) RunsSfclab(f *plan.Function) bool { return params(f).Impl == ImplSfclab }

// Setup starts HAProxy or `sfclab lb` (config checked first, then waited for until it
// accepts connections) or loads the nftables DNAT ruleset.
func (LB) Setup(ctx context.Context, env vnf.Env) error {
	f := env.Plan.Function
	if params(f).Impl == ImplSfclab {
		return setupSfclab(ctx, env)
	}
	if params(f).Impl == ImplNft {
		if _, err := env.Node.Output(ctx, []byte(NftRuleset(f)), "nft", "-f", "-"); err != nil {
			return vnf.Errorf(env, "load nftables load-balancer ruleset: %w", err)
		}
		return nil
	}
	cfg := env.Path(".haproxy.cfg")
	if err := vnf.WriteFile(env.Node, cfg, []byte(HAProxyConfig(f)), 0o644); err != nil {
		return vnf.Errorf(env, "write haproxy config: %w", err)
	}
	if _, err := env.Node.Output(ctx, nil, "haproxy", "-c", "-q", "-f", cfg); err != nil {
		return vnf.Errorf(env, "haproxy rejects its config %s: %w", cfg, err)
	}
	pid, err := env.Node.Daemon([]string{"haproxy", "-db", "-f", cfg}, env.Path(".haproxy.log"))
	if err != nil {
		return vnf.Errorf(env, "start haproxy: %w", err)
	}
	if err := vnf.WriteFile(env.Node, env.Path(".haproxy.pid"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return vnf.Errorf(env, "write haproxy pid file: %w", err)
	}
	addr := net.JoinHostPort(f.IngressAddr.String(), strconv.Itoa(int(f.Port)))
	if err := waitListening(ctx, env.Node, addr); err != nil {
		return vnf.Errorf(env, "haproxy does not accept on %s: %w (log: %s)", addr, err, env.Path(".haproxy.log"))
	}
	return nil
}

// waitListening waits until a socket listens on addr in the node, or ReadyTimeout passes. It
// does not dial: HAProxy would open a connection to its backend for the dial and, the
// backend refusing, retry it for seconds (retries 3, a second apart), long enough to reach
// the one-off iperf3 server a probe starts next, which then serves that empty connection
// and exits (seen with HAProxy in a TCG guest: "unable to receive parameters from client").
func waitListening(ctx context.Context, node vnf.Node, addr string) error {
	deadline := time.Now().Add(ReadyTimeout)
	for {
		ok, err := vnf.Listens(ctx, node, addr)
		if ok {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("nothing listens on %s", addr)
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Teardown stops HAProxy, drains and stops `sfclab lb`, or deletes the nftables table.
func (LB) Teardown(ctx context.Context, env vnf.Env) error {
	if params(env.Plan.Function).Impl == ImplSfclab {
		return teardownSfclab(env)
	}
	if params(env.Plan.Function).Impl == ImplNft {
		return vnf.DeleteNftTables(ctx, env.Node, "ip "+NftTable)
	}
	data, err := vnf.ReadFile(env.Node, env.Path(".haproxy.pid"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return vnf.Errorf(env, "read haproxy pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return vnf.Errorf(env, "haproxy pid file %s: %w", env.Path(".haproxy.pid"), err)
	}
	if p, ok := env.Node.(vnf.Processes); ok { // a VM guest's HAProxy: stopped in the guest
		if err := p.StopGroup(pid, time.Second); err != nil {
			return vnf.Errorf(env, "stop haproxy %d: %w", pid, err)
		}
		return vnf.Remove(env.Node, env.Path(".haproxy.pid"))
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return vnf.Errorf(env, "stop haproxy %d: %w", pid, err)
	}
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return vnf.Remove(env.Node, env.Path(".haproxy.pid"))
}

// HAProxyConfig renders HAProxy's configuration: TCP mode, one frontend on the service
// address, one backend per destination instance, splicing and threads as asked.
func HAProxyConfig(f *plan.Function) string {
	p := params(f)
	var b strings.Builder
	fmt.Fprintf(&b, "# generated by sfclab\nglobal\n\tmaxconn %d\n", p.MaxConn)
	if p.Threads > 0 { // else HAProxy's default: one thread per CPU it may run on
		fmt.Fprintf(&b, "\tnbthread %d\n", p.Threads)
	}
	b.WriteString("\n")
	b.WriteString("defaults\n\tmode tcp\n")
	fmt.Fprintf(&b, "\ttimeout connect %s\n\ttimeout client %s\n\ttimeout server 10m\n",
		haproxyTime(p.TimeoutConnect, "5s"), haproxyTime(p.TimeoutClient, "10m"))
	if p.SpliceOn() {
		b.WriteString("\toption splice-request\n\toption splice-response\n")
	}
	fmt.Fprintf(&b, "\nfrontend sfclab_in\n\tbind %s:%d\n\tdefault_backend sfclab_backends\n\n", f.IngressAddr, f.Port)
	fmt.Fprintf(&b, "backend sfclab_backends\n\tbalance %s\n", p.Balance)
	check := ""
	if p.CheckInterval != "" {
		rise, fall := p.RiseFall()
		check = fmt.Sprintf(" check inter %s rise %d fall %d", haproxyTime(p.CheckInterval, ""), rise, fall)
	}
	for _, be := range f.Backends {
		fmt.Fprintf(&b, "\tserver %s %s:%d weight %d%s\n", be.Name, be.Addr, be.Port, be.Weight, check)
	}
	return b.String()
}

// haproxyTime writes a duration parameter as HAProxy reads it (milliseconds), def when unset.
func haproxyTime(s, def string) string {
	d, err := time.ParseDuration(s)
	if s == "" || err != nil {
		return def
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// NftRuleset renders the kernel load balancer: DNAT of the service address and port to a
// backend chosen by a seeded jhash (of the source address, or of the whole 5-tuple); weights
// are slots in the hash map.
func NftRuleset(f *plan.Function) string {
	p := params(f)
	proto := p.Protocol
	key := "ip saddr"
	if p.Balance == "flow" {
		key = fmt.Sprintf("ip saddr . %s sport . ip daddr . %s dport", proto, proto)
	}
	var slots []string
	samePort := true
	for _, be := range f.Backends {
		if be.Port != f.Port {
			samePort = false
		}
	}
	for _, be := range f.Backends {
		for range be.Weight {
			target := be.Addr.String()
			if !samePort {
				target += fmt.Sprintf(" . %d", be.Port)
			}
			slots = append(slots, fmt.Sprintf("%d : %s", len(slots), target))
		}
	}
	dnat := "dnat to"
	if !samePort {
		dnat = "dnat ip addr . port to"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {\n\tchain prerouting {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n", NftTable)
	fmt.Fprintf(&b, "\t\tip daddr %s %s dport %d counter %s jhash %s mod %d seed 0x%x map { %s } comment \"balance\"\n",
		f.IngressAddr, proto, f.Port, dnat, key, len(slots), p.Seed, strings.Join(slots, ", "))
	b.WriteString("\t}\n}\n")
	return b.String()
}

// ComposeConfigPath is where an exported l4lb node writes its HAProxy configuration.
const ComposeConfigPath = "/etc/haproxy/sfclab.cfg"

// Where an exported sfclab balancer finds its configuration (mounted read-only from beside the
// compose file) and serves its counters.
const (
	ComposeLBConfigPath = "/etc/sfclab/lb.json"
	ComposeLBStatsPath  = "/run/sfclab-lb.sock"
)

// Compose loads the nft balancer, writes, checks and runs HAProxy's configuration, or runs
// `sfclab lb` (the program mounted by the export, its configuration from ComposeFiles) in an
// exported container (vnf.Composer).
func (LB) Compose(f *plan.Function) ([]vnf.ComposeStep, string, error) {
	switch params(f).Impl {
	case ImplSfclab:
		return nil, fmt.Sprintf(`exec "$%s" lb --config %s`, vnf.ComposeProgramVar, ComposeLBConfigPath), nil
	case ImplNft:
		return []vnf.ComposeStep{{Cmd: "nft -f -", Stdin: NftRuleset(f)}}, "", nil
	}
	return []vnf.ComposeStep{
		{Cmd: "cat >" + ComposeConfigPath, Stdin: HAProxyConfig(f)},
		{Cmd: "haproxy -c -q -f " + ComposeConfigPath},
	}, "exec haproxy -db -f " + ComposeConfigPath, nil
}

// ComposeFiles is the configuration of `sfclab lb` for impl sfclab, none for the others
// (vnf.ComposeFiler).
func (LB) ComposeFiles(f *plan.Function) ([]vnf.ComposeFile, error) {
	if params(f).Impl != ImplSfclab {
		return nil, nil
	}
	data, err := renderLBConfig(f, ComposeLBStatsPath)
	if err != nil {
		return nil, fmt.Errorf("export l4lb impl sfclab: %w", err)
	}
	return []vnf.ComposeFile{{Name: "lb.json", Path: ComposeLBConfigPath, Data: data}}, nil
}

// ImagePackages are HAProxy and nftables (vnf.ImagePackager).
func (LB) ImagePackages() []string { return []string{"haproxy", "nftables"} }
