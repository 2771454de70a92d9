package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// A kind that rewrites the chain's destination (a proxy, as l4lb and http-proxy are) also
// touches nothing outside its package and the register: its parameter type implements
// spec.Proxy, and from that alone the plan gives it a listen port and backends and makes it
// the chain's target, and the probes address it. The relay below exists only in this file:
// one nft DNAT rule to its first backend.

type nftRelay struct{}

// nftRelayParams are the relay's parameters: the port it accepts the chain's connections on.
type nftRelayParams struct {
	Port uint16 `yaml:"port,omitempty" json:"port"`
}

func (p *nftRelayParams) SetDefaults() {
	if p.Port == 0 {
		p.Port = 7100
	}
}

// ListenPort and ConnectPort make the relay a spec.Proxy: backends are reached on the next
// port up, so the servers must listen where the relay connects (probe.ServicePort asks the
// plan, not the kind's name), not where the source sends.
func (p *nftRelayParams) ListenPort() uint16                  { return p.Port }
func (p *nftRelayParams) ConnectPort(listen, _ uint16) uint16 { return listen + 1 }

func (nftRelay) NewParams() any                     { return &nftRelayParams{} }
func (nftRelay) Requires(f *plan.Function) []string { return []string{"nft"} }

const nftRelayTable = "ip sfclab_relay"

func (nftRelay) Setup(ctx context.Context, env vnf.Env) error {
	f := env.Plan.Function
	if len(f.Backends) == 0 {
		return vnf.Errorf(env, "relay: the plan gave no backends")
	}
	b := f.Backends[0]
	rules := fmt.Sprintf(`table %s {
	chain pre { type nat hook prerouting priority dstnat; policy accept; tcp dport %d dnat to %s:%d; }
	chain post { type nat hook postrouting priority srcnat; policy accept; oifname %q masquerade; }
}
`, nftRelayTable, f.Port, b.Addr, b.Port, f.Egress)
	if _, err := env.Node.Output(ctx, []byte(rules), "nft", "-f", "-"); err != nil {
		return vnf.Errorf(env, "load relay rules: %w", err)
	}
	return nil
}

func (nftRelay) Teardown(ctx context.Context, env vnf.Env) error {
	return vnf.DeleteNftTables(ctx, env.Node, nftRelayTable)
}

const nftRelayLab = `name: t-nrelay
endpoints: {client: {}, server: {}}
functions: {r: {kind: nftrelay}}
chains: [{from: client, to: server, hops: [r]}]
`

// TestNewProxyKind: the relay becomes its chain's target with the server as its backend (no
// root needed), and, as root, `sfclab bench` measures TCP round trips through it.
func TestNewProxyKind(t *testing.T) {
	privateState(t)
	t.Cleanup(kinds.WithExtra("nftrelay", nftRelay{}))
	lab, err := spec.Decode([]byte(nftRelayLab), "relay.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		t.Fatal(err)
	}
	c, r := p.Chains[0], p.Node("r")
	if r == nil || !r.IsProxy() || c.TargetNode != "r" || c.Port != 7100 || len(r.Function.Backends) != 1 || r.Function.Backends[0].Port != 7101 {
		t.Fatalf("chain target %s:%d, relay %+v: want the relay as the target on 7100 with the server as its backend on 7101", c.TargetNode, c.Port, r)
	}
	if got := probe.ServicePort(p, c); got != 7101 {
		t.Fatalf("servers listen on %d, want 7101, where the relay connects", got)
	}

	requireRoot(t)
	dir := t.TempDir()
	exp := "name: t-nrelay\nrepetitions: 1\nscenarios: [{name: relay, lab: lab.yaml}]\nprobes: {tcprtt: {connects: 5, requests: 20}}\n"
	for name, text := range map[string]string{"lab.yaml": nftRelayLab, "exp.yaml": exp} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "out")
	if code, stdout, errOut := run(t, "bench", filepath.Join(dir, "exp.yaml"), "--out", out); code != 0 {
		t.Fatalf("bench through the relay: exit %d\n%s%s", code, stdout, errOut)
	}
	st, err := results.Open(filepath.Join(out, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	samples, err := st.Samples()
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, x := range samples {
		if x.Probe == "tcprtt" {
			n[x.Metric]++
		}
	}
	if n["connect"] != 5 || n["rtt"] != 20 {
		t.Errorf("tcprtt samples through the relay: %v, want 5 connects and 20 round trips", n)
	}
	if code, out, _ := run(t, "inspect"); code != 0 || strings.Contains(out, "t-nrelay") {
		t.Errorf("the bench left the relay lab: %q", out)
	}
}
