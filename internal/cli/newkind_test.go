package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/docker"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// Adding a function kind touches its package, the register and its docs only (issue 13). The
// kind below exists only in this file: registered with kinds.WithExtra, it goes through the
// lab decoder (its params, defaults and checks), the plan, stored plans, preflight, deploy on
// netns, inspect (its rule counters) and export to compose, with no edit anywhere else.

// meter is the test's own kind: a router that counts what it forwards, one nft rule per
// protocol.
type meter struct{}

// meterParams are its parameters, a type of its own that spec has never heard of.
type meterParams struct {
	// Protocols are counted each by its own rule (default icmp).
	Protocols []string `yaml:"protocols,omitempty" json:"protocols"`
	// Requires are more programs the kind needs, for preflight to check.
	Requires []string `yaml:"requires,omitempty" json:"requires,omitempty"`
}

// meterPackage is the Debian package the kind asks the node image for (vnf.ImagePackager).
const meterPackage = "sfclab-meter-test-package"

func (p *meterParams) SetDefaults() {
	if len(p.Protocols) == 0 {
		p.Protocols = []string{"icmp"}
	}
}

func (p *meterParams) Check(fn *spec.Function, pr *spec.Problems) {
	for _, proto := range p.Protocols {
		pr.OneOf("protocol", proto, "icmp", "tcp", "udp")
	}
}

func (meter) NewParams() any { return &meterParams{} }

func (meter) Requires(f *plan.Function) []string {
	return append([]string{"nft"}, f.Params.(*meterParams).Requires...)
}

const meterTable = "inet sfclab_meter"

func meterRuleset(f *plan.Function) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s {\n\tchain forward {\n\t\ttype filter hook forward priority 0; policy accept;\n", meterTable)
	for _, proto := range f.Params.(*meterParams).Protocols {
		fmt.Fprintf(&b, "\t\tmeta l4proto %s counter comment %q\n", proto, proto)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

func (meter) Setup(ctx context.Context, env vnf.Env) error {
	if _, err := env.Node.Output(ctx, []byte(meterRuleset(env.Plan.Function)), "nft", "-f", "-"); err != nil {
		return vnf.Errorf(env, "load meter rules: %w", err)
	}
	return nil
}

func (meter) Teardown(ctx context.Context, env vnf.Env) error {
	return vnf.DeleteNftTables(ctx, env.Node, meterTable)
}

// Counters reads the rules' counters back (vnf.RuleCounters).
func (meter) Counters(ctx context.Context, node vnf.Node, f *plan.Function) ([]vnf.Counter, error) {
	out, err := node.Output(ctx, nil, "nft", "-j", "list", "table", "inet", "sfclab_meter")
	if err != nil {
		return nil, fmt.Errorf("read meter counters: %w", err)
	}
	var doc struct {
		Nftables []struct {
			Rule *struct {
				Comment string           `json:"comment"`
				Expr    []map[string]any `json:"expr"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("decode meter counters: %w", err)
	}
	var cs []vnf.Counter
	for _, o := range doc.Nftables {
		if o.Rule == nil {
			continue
		}
		for _, e := range o.Rule.Expr {
			if c, ok := e["counter"].(map[string]any); ok {
				pk, _ := c["packets"].(float64)
				by, _ := c["bytes"].(float64)
				cs = append(cs, vnf.Counter{Rule: o.Rule.Comment, Packets: uint64(pk), Bytes: uint64(by)})
			}
		}
	}
	return cs, nil
}

// Compose loads the same rules in an exported container (vnf.Composer).
func (meter) Compose(f *plan.Function) ([]vnf.ComposeStep, string, error) {
	return []vnf.ComposeStep{{Cmd: "nft -f -", Stdin: meterRuleset(f)}}, "", nil
}

// ImagePackages names what the node image needs for it (vnf.ImagePackager).
func (meter) ImagePackages() []string { return []string{meterPackage} }

// withMeter registers the meter kind for the test.
func withMeter(t *testing.T) {
	t.Helper()
	t.Cleanup(kinds.WithExtra("meter", meter{}))
}

const meterLab = `name: t-meter
endpoints: {client: {}, server: {}}
functions:
  m:
    kind: meter
    params: {protocols: [icmp, tcp]PARAMS}
chains: [{from: client, to: server, hops: [m]}]
`

func meterLabFile(t *testing.T, params string) string {
	return writeLabFile(t, meterLabText(params))
}

func meterLabText(params string) string { return strings.Replace(meterLab, "PARAMS", params, 1) }

// TestNewKindDecodePlanExport: without root, the new kind's params decode with their own
// checks (file:line messages), the dry-run plans it, its stored plan decodes back to its own
// type, export writes its rules, and the node image asks for its package.
func TestNewKindDecodePlanExport(t *testing.T) {
	privateState(t)
	if code, _, errOut := run(t, "deploy", "--dry-run", meterLabFile(t, "")); code != 1 || !strings.Contains(errOut, `unknown kind "meter"`) {
		t.Fatalf("before registration: exit %d, %q; want unknown kind", code, errOut)
	}
	if slices.Contains(docker.Packages(), meterPackage) {
		t.Fatalf("image packages have %s before the kind is registered", meterPackage)
	}
	withMeter(t)

	for _, tt := range []struct{ name, file, want string }{
		{"own check", strings.Replace(meterLab, "[icmp, tcp]PARAMS", "[icmp, sctp]", 1),
			`lab.yaml:5:5: function "m": protocol "sctp" is not one of [icmp tcp udp]`},
		{"unknown param", meterLabText(", colour: red"),
			`lab.yaml:6:38: unknown field "colour" in meter params (known: protocols, requires)`},
		{"param type", strings.Replace(meterLab, "[icmp, tcp]PARAMS", "icmp", 1),
			"lab.yaml:6:25: meter params.protocols must be a list of text values, got `icmp`"},
		{"kinds listed", strings.Replace(meterLabText(""), "kind: meter", "kind: metre", 1),
			`lab.yaml:5:5: function "m": unknown kind "metre"; kinds: [custom firewall forwarder http-proxy l4lb meter nat tap]`},
	} {
		code, _, errOut := run(t, "deploy", "--dry-run", writeLabFile(t, tt.file))
		if code != 1 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, stderr %q, want %q", tt.name, code, errOut, tt.want)
		}
	}

	code, out, errOut := run(t, "deploy", "--dry-run", "-o", "json", meterLabFile(t, ""))
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, errOut)
	}
	p, err := plan.Unmarshal([]byte(out), kinds.Spec())
	if err != nil {
		t.Fatalf("stored plan of the new kind: %v", err)
	}
	m := p.Node("m")
	if m == nil || m.Function == nil || m.Function.Kind != "meter" {
		t.Fatalf("plan has no meter node m: %s", out)
	}
	mp, ok := m.Function.Params.(*meterParams)
	if !ok || !slices.Equal(mp.Protocols, []string{"icmp", "tcp"}) {
		t.Errorf("stored params decode as %T %+v, want *meterParams with icmp, tcp", m.Function.Params, m.Function.Params)
	}
	code, out, _ = run(t, "deploy", "--dry-run", writeLabFile(t, strings.Replace(meterLab, "{protocols: [icmp, tcp]PARAMS}", "{}", 1)))
	if code != 0 || !strings.Contains(out, "m ") || !strings.Contains(out, "meter") {
		t.Errorf("dry run with defaults: exit %d\n%s", code, out)
	}

	code, out, errOut = run(t, "export", "--format", "compose", meterLabFile(t, ""))
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	if strings.Contains(errOut, "not exported") || !strings.Contains(out, `meta l4proto tcp counter comment "tcp"`) {
		t.Errorf("export does not carry the meter's rules (stderr %q):\n%s", errOut, out)
	}
	if !slices.Contains(docker.Packages(), meterPackage) {
		t.Errorf("image packages %v lack the new kind's %s", docker.Packages(), meterPackage)
	}
}

// TestNewKindPreflightDeployInspect: as root, preflight checks the programs the new kind
// requires, the lab deploys on netns with its rules, inspect shows their counters after a
// ping through, and destroy removes it.
func TestNewKindPreflightDeployInspect(t *testing.T) {
	requireRoot(t)
	privateState(t)
	withMeter(t)

	code, _, errOut := run(t, "deploy", meterLabFile(t, ", requires: [sfclab-no-such-program]"))
	if code != 1 || !strings.Contains(errOut, "sfclab-no-such-program (needed by m)") {
		t.Fatalf("preflight of the new kind's programs: exit %d, %q", code, errOut)
	}
	if code, out, _ := run(t, "inspect"); code != 0 || strings.Contains(out, "t-meter") {
		t.Fatalf("a failed preflight left a lab: %q", out)
	}

	lab := meterLabFile(t, "")
	code, out, errOut := run(t, "deploy", lab)
	t.Cleanup(func() { run(t, "destroy", "t-meter") })
	if code != 0 {
		t.Fatalf("deploy: exit %d\n%s%s", code, out, errOut)
	}
	const pings = 3
	if code, _, _ := run(t, "exec", "t-meter", "client", "--", "ping", "-c", fmt.Sprint(pings), "-i", "0.2", "-W", "2", "198.18.1.2"); code != 0 {
		t.Fatalf("ping through the meter: exit %d", code)
	}
	code, out, _ = run(t, "inspect", "t-meter", "--format", "json")
	var infos []struct {
		Nodes []struct {
			Name  string
			Down  string
			Rules []vnf.Counter
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &infos) != nil || len(infos) != 1 {
		t.Fatalf("inspect json: exit %d %q", code, out)
	}
	var got []vnf.Counter
	for _, n := range infos[0].Nodes {
		if n.Name == "m" {
			got = n.Rules
		}
	}
	if len(got) != 2 || got[0].Rule != "icmp" || got[1].Rule != "tcp" {
		t.Fatalf("meter counters in inspect = %+v, want icmp and tcp rules", got)
	}
	// Requests and replies both cross the meter.
	if got[0].Packets != 2*pings || got[0].Bytes == 0 || got[1].Packets != 0 {
		t.Errorf("meter counters after %d pings = %+v, want icmp %d packets, tcp 0", pings, got, 2*pings)
	}
	if code, out, _ := run(t, "inspect", "t-meter"); code != 0 || !strings.Contains(out, "meter m rules:") {
		t.Errorf("inspect table lacks the meter's rules:\n%s", out)
	}
	if code, out, _ := run(t, "destroy", lab); code != 0 || !strings.Contains(out, "destroyed lab t-meter") {
		t.Errorf("destroy: exit %d %q", code, out)
	}
}

// Kinds that terminate connections or rewrite destinations need addresses only the plan
// knows. The plan serves them by the interfaces their params implement (spec.Proxy,
// spec.Rewriter), so the two test kinds below, a relay and a port map, get their backends and
// DNAT targets with no edit to plan.

// planOnly is a kind whose node the test never deploys: only its params matter.
type planOnly struct{ params func() any }

func (k planOnly) NewParams() any                        { return k.params() }
func (planOnly) Requires(*plan.Function) []string        { return nil }
func (planOnly) Setup(context.Context, vnf.Env) error    { return nil }
func (planOnly) Teardown(context.Context, vnf.Env) error { return nil }

// relayParams make a proxy that listens on Listen and connects to its backends on To.
type relayParams struct {
	Listen uint16 `yaml:"listen,omitempty" json:"listen"`
	To     uint16 `yaml:"to,omitempty" json:"to"`
}

func (p *relayParams) ListenPort() uint16 { return p.Listen }
func (p *relayParams) ConnectPort(listen, backendListens uint16) uint16 {
	if p.To != 0 {
		return p.To
	}
	return listen
}

// portmapParams rewrite one port to another on a target.
type portmapParams struct {
	Map []spec.DNATRule `yaml:"map" json:"map"`
}

func (p *portmapParams) DNATRules() []spec.DNATRule { return p.Map }

// TestNewKindProxyAndRewriter: a relay in front of two server instances gets its listen port
// from the classifier and a backend per instance on its own port; a port map gets its DNAT
// target resolved to the server's address; a relay with no port and no single destination port
// is refused naming its kind.
func TestNewKindProxyAndRewriter(t *testing.T) {
	privateState(t)
	t.Cleanup(kinds.WithExtra("relay", planOnly{func() any { return &relayParams{} }}))
	t.Cleanup(kinds.WithExtra("portmap", planOnly{func() any { return &portmapParams{} }}))
	const lab = `name: t-relay
endpoints: {client: {}, server: {instances: 2}}
functions:
  pm: {kind: portmap, params: {map: [{protocol: tcp, port: 8080, to: server, to_port: 80}]}}
  r: {kind: relay, params: {to: 9000}}
chains: [{from: client, to: server, classifier: {protocol: tcp, destination_port: "CLASS"}, hops: [pm, r]}]
`
	code, out, errOut := run(t, "deploy", "--dry-run", "-o", "json", writeLabFile(t, strings.Replace(lab, "CLASS", "8080", 1)))
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, errOut)
	}
	p, err := plan.Unmarshal([]byte(out), kinds.Spec())
	if err != nil {
		t.Fatalf("stored plan: %v", err)
	}
	r, pm := p.Node("r"), p.Node("pm")
	if r == nil || pm == nil || r.Function == nil || pm.Function == nil {
		t.Fatalf("plan lacks nodes r and pm: %s", out)
	}
	if r.Function.Port != 8080 || len(r.Function.Backends) != 2 {
		t.Fatalf("relay resolved to port %d, backends %+v; want 8080 and the 2 server instances", r.Function.Port, r.Function.Backends)
	}
	for i, be := range r.Function.Backends {
		s := p.Node(be.Name)
		if be.Port != 9000 || s == nil || !strings.HasPrefix(be.Name, "server") || !be.Addr.IsValid() {
			t.Errorf("relay backend %d = %+v, want a server instance on port 9000", i, be)
		}
	}
	if len(pm.Function.DNAT) != 1 || pm.Function.DNAT[0].ToPort != 80 || pm.Function.DNAT[0].To != r.Function.Backends[0].Addr {
		t.Errorf("port map resolved to %+v, want port 8080 to %v:80 (server's first instance)", pm.Function.DNAT, r.Function.Backends[0].Addr)
	}

	code, _, errOut = run(t, "deploy", "--dry-run", writeLabFile(t, strings.Replace(lab, "CLASS", "8000-8100", 1)))
	if code != 1 || !strings.Contains(errOut, `function "r": relay needs a port`) {
		t.Errorf("relay without a port: exit %d, %q; want the relay named", code, errOut)
	}
}
