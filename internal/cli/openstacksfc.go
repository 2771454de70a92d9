package cli

import (
	"github.com/sfclab/sfclab/runtime/vm/accel"
	"net/url"

	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/sfclab/sfclab/internal/oracle"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sfclab/sfclab"
	"github.com/sfclab/sfclab/api"
	"github.com/sfclab/sfclab/api/sfcclient"
	"github.com/sfclab/sfclab/apiplane"
	"github.com/sfclab/sfclab/bench"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe/firstpacket"
	"github.com/sfclab/sfclab/runtime/kubernetes"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/studies"
	"github.com/sfclab/sfclab/vnf/kinds"
	"github.com/spf13/cobra"
)

// openstackSFC is the name of study C's reproduction.
const openstackSFC = studies.OpenStackSFC

// openstackSFCLab is the lab the experiment deploys (embedded).
const openstackSFCLab = "experiments/labs/openstack-sfc.yaml"

// firstPacketPort is the UDP port the first-packet probes go to on the server.
const firstPacketPort = 40001

func firstPacketAddr(p *plan.Plan) netip.AddrPort {
	n := p.Transparent.Node("server")
	if n == nil || len(n.Ports) == 0 {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(n.Ports[0].Address.Addr(), firstPacketPort)
}

// openFirstPacket opens the probe's sockets in the client's and the server's nodes, entered
// through the lab's runtime (Node.Do): a netns node's named namespace, a pod's namespace when
// sfclab runs on the pod's Kubernetes node (a pod on another machine is refused, saying so).
func openFirstPacket(d *deploy.Deployer, p *plan.Plan) (*firstpacket.Probe, error) {
	if p.Transparent.Node("client") == nil || p.Transparent.Node("server") == nil {
		return nil, fmt.Errorf("%s: the lab needs nodes client and server", openstackSFCLab)
	}
	c, err := d.Node(p, "client")
	if err != nil {
		return nil, err
	}
	s, err := d.Node(p, "server")
	if err != nil {
		return nil, err
	}
	return firstpacket.Open(c, s, firstPacketAddr(p))
}

// quickFunctions is how many forwarders --quick deploys and chains (f1..f3).
const quickFunctions = 3

// byNumber orders node names by their stem, then by the number they end in (f2 before f10).
func byNumber(a, b string) int {
	split := func(s string) (string, int) {
		i := len(s)
		for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
			i--
		}
		n, _ := strconv.Atoi(s[i:])
		return s[:i], n
	}
	as, an := split(a)
	bs, bn := split(b)
	return cmp.Or(cmp.Compare(as, bs), cmp.Compare(an, bn), cmp.Compare(a, b))
}

// keepFunctions removes from the deploy-time lab every forwarder after the first n (f1..fn
// stay), so that --quick deploys only the functions its chains use.
func keepFunctions(lab *spec.Lab, n int) {
	for i := n + 1; lab.Functions[fmt.Sprintf("f%d", i)] != nil; i++ {
		delete(lab.Functions, fmt.Sprintf("f%d", i))
	}
}

// deployTimeRuntime says, for the terminal and the report, what the deploy-time lab runs on:
// the runtime, on kubernetes the cluster (version, server, nodes) and which Kubernetes node
// each pod went to, on vm which nodes are guests, their machine and the accelerator (a).
func deployTimeRuntime(ctx context.Context, d *deploy.Deployer, p *plan.Plan, a accel.Decision) (string, error) {
	name := cmp.Or(p.Runtime, spec.DefaultRuntime)
	if name == spec.RuntimeVM {
		return vmDeployTimeRuntime(p, a), nil
	}
	if name != spec.RuntimeKubernetes {
		return fmt.Sprintf("runtime %s (every node a network namespace of this host)", name), nil
	}
	rt, err := d.Runtime(name)
	if err != nil {
		return "", err
	}
	cluster := "unknown cluster"
	if r, ok := rt.(interface {
		Describe(context.Context) (string, error)
	}); ok {
		if cluster, err = r.Describe(ctx); err != nil {
			return "", fmt.Errorf("describe the cluster: %w", err)
		}
	}
	on := map[string][]string{} // Kubernetes node -> pods
	for _, n := range p.Nodes {
		node, err := d.Node(p, n.Name)
		if err != nil {
			return "", err
		}
		if k, ok := node.(*kubernetes.Node); ok {
			on[k.KubeNode] = append(on[k.KubeNode], n.Name)
		}
	}
	var where []string
	for _, kn := range slices.Sorted(maps.Keys(on)) {
		slices.SortFunc(on[kn], byNumber)
		where = append(where, fmt.Sprintf("%s on %s", strings.Join(on[kn], ", "), kn))
	}
	return fmt.Sprintf("runtime kubernetes (cluster %s); the lab's %d pods: %s. "+
		"Study C's Fig. 3 spreads its functions over compute nodes; this lab names no hosts, so every pod runs on the Kubernetes node of the machine sfclab runs on "+
		"(the first-packet probe enters the client's and the server's pods from sfclab's process) and the chains do not cross nodes: "+
		"the REST steps time the API and the steering programmed through the sfclab agent",
		cluster, len(p.Nodes), strings.Join(where, "; ")), nil
}

// vmDeployTimeRuntime says which of the deploy-time lab's nodes are QEMU guests (runtime vm),
// with their machine and the accelerator they run on, marked accel.TCGMark under TCG.
func vmDeployTimeRuntime(p *plan.Plan, a accel.Decision) string {
	var guests, others []string
	machines := map[string]bool{}
	for _, n := range p.Nodes {
		if n.VM == nil {
			others = append(others, n.Name)
			continue
		}
		guests = append(guests, n.Name)
		machines[fmt.Sprintf("%d vCPU, %d MiB", n.VM.CPUs, n.VM.Memory)] = true
	}
	slices.SortFunc(guests, byNumber)
	slices.Sort(others)
	on := "KVM"
	if a.Emulated() {
		on = fmt.Sprintf("TCG, %s (%s)", accel.TCGMark, a.Reason)
	}
	return fmt.Sprintf("runtime vm: %s network namespaces of this host, the functions %s QEMU guests (%s each) under %s",
		strings.Join(others, " and "), strings.Join(guests, ", "), strings.Join(slices.Sorted(maps.Keys(machines)), "; "), on)
}

// vmDeployTimeNote is the deploy-time report's paragraph on a lab whose functions are VMs:
// what the guests take part in, the TCG mark, and the lab's deploy (the guests' boot), which
// is not one of the study's figures.
func vmDeployTimeNote(a accel.Decision, labDeploy deploy.Timing) string {
	s := "The functions are VMs, as study C's VNFs were, booted before the API is served (networking-sfc chains the ports of VMs that already run). " +
		"The REST steps program the steering on the host side of the guests' ports (the guests take no part); the first packet crosses every guest of the chain, forwarded by its kernel. "
	if a.Emulated() {
		s += fmt.Sprintf("**%s**: the guests run under TCG (binary translation; %s), so the first-packet columns cross emulated CPUs and say nothing about KVM guests; the REST steps enter no guest and are not marked (the guests' QEMU processes share this host's CPUs with them). ", accel.TCGMark, a.Reason)
	}
	return s + fmt.Sprintf("The lab's deploy, the guests' boot included, took %s (not one of the figures below).", labDeploy.Total.Round(100*time.Millisecond))
}

// runOpenStackSFC reproduces study C's deploy-time figure: it deploys the ten-function lab,
// serves the networking-sfc API over it on a loopback port, and times the four REST steps at
// the client over HTTP for chains of 1..10 functions, then writes report.md and samples.csv.
//
// On runtime kubernetes (runtime is the --runtime flag) the lab's nodes are pods; the report
// says so, with the cluster and where the pods went. With vm set (`--vm`) the lab's functions
// are QEMU guests (runtime vm; client and server stay namespaces), booted before the API is
// served, as networking-sfc chains VMs that already run; under TCG (d) what crosses the
// guests (the first-packet columns) is marked accel.TCGMark, and the lab's deploy time, the
// guests' boot included, is given beside the figures, not among them.
func runOpenStackSFC(cmd *cobra.Command, quick bool, out string, repetitions int, runtime string, vm bool, d accel.Decision) (err error) {
	if err := deploy.CheckRoot(); err != nil {
		return err
	}
	data, err := fs.ReadFile(sfclab.Files, openstackSFCLab)
	if err != nil {
		return fmt.Errorf("read %s: %w", openstackSFCLab, err)
	}
	lab, err := spec.Decode(data, openstackSFCLab, kinds.Spec())
	if err != nil {
		return err
	}
	if runtime == spec.RuntimeKubernetes {
		lab.Runtime = runtime
	}
	if quick {
		keepFunctions(lab, quickFunctions)
	}
	if vm {
		if err := experiment.Override(lab, spec.RuntimeVM, ""); err != nil {
			return fmt.Errorf("%s with its functions as VMs: %w", openstackSFCLab, err)
		}
	}
	p, err := plan.Build(lab)
	if err != nil {
		return err
	}
	if p.Transparent == nil {
		return fmt.Errorf("%s: the lab must use steering: transparent (chains created over the API are steered only there)", openstackSFCLab)
	}
	e := &sfcclient.DeployTime{Lab: p.Lab, Source: "client", Destination: "server",
		MatchFields: map[string]any{"protocol": "udp"}, Repetitions: 10}
	for i := 1; p.Transparent.Node(fmt.Sprintf("f%d", i)) != nil; i++ {
		e.Functions = append(e.Functions, fmt.Sprintf("f%d", i))
	}
	if quick {
		e.Repetitions = 2
	}
	if repetitions > 0 {
		e.Repetitions = repetitions
	}
	if out == "" {
		out = filepath.Join("out", openstackSFC+"-"+time.Now().Format("20060102-150405"))
	}
	errOut := cmd.ErrOrStderr()
	ctx := cmd.Context()
	dep := deploy.New()
	dep.Log = func(f string, a ...any) { fmt.Fprintf(errOut, f+"\n", a...) }
	if vm {
		fmt.Fprintf(errOut, "study C deploy time: booting the lab's %d functions as VMs (%s)\n", len(e.Functions), d)
	}
	labTiming, err := dep.Deploy(ctx, p, openstackSFCLab)
	if err != nil {
		return err
	}
	defer func() {
		if derr := dep.Destroy(context.WithoutCancel(ctx), p.Lab); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	where, err := deployTimeRuntime(ctx, dep, p, d)
	if err != nil {
		return err
	}
	fmt.Fprintf(errOut, "study C deploy time: %s\n", where)
	rec := &api.Recorder{}
	plane := &apiplane.Switch{Plane: &apiplane.Plane{Journal: dep.Journal}, Other: rec}
	s, err := api.New(ctx, api.Config{Journal: dep.Journal, DataPlane: plane, Log: dep.Log})
	if err != nil {
		return err
	}
	probe, err := openFirstPacket(dep, p)
	if err != nil {
		return err
	}
	defer probe.Close()
	e.FirstPacket = func(ctx context.Context, dd *sfcclient.Deployed) (time.Duration, error) {
		r, err := probe.Run(ctx, len(dd.Groups))
		if err != nil {
			return 0, err
		}
		return r.Arrived.Sub(dd.ChainAnswered), nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen on loopback: %w", err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	c := &sfcclient.Client{Endpoint: "http://" + ln.Addr().String()}
	fmt.Fprintf(errOut, "study C deploy time: chains of 1..%d functions x %d repetitions over %s\n", len(e.Functions), e.Repetitions, c.Endpoint)
	tty := isTerminal(errOut)
	started := time.Now()
	e.Progress = func(rep, n int, dd *sfcclient.Deployed) {
		if tty {
			fmt.Fprintf(errOut, "\r\033[Krepetition %d/%d, %2d functions: %8.3f ms", rep, e.Repetitions, n, float64(dd.Total().Microseconds())/1000)
		} else if n == len(e.Functions) { // a log keeps a line per repetition
			fmt.Fprintf(errOut, "study C deploy time: repetition %d/%d done (elapsed %s)\n", rep, e.Repetitions, time.Since(started).Round(time.Second))
		}
	}
	samples, runErr := e.Run(ctx, c)
	if tty {
		fmt.Fprintln(errOut)
	}
	if len(samples) == 0 {
		return runErr
	}
	var rep bytes.Buffer
	fmt.Fprintf(&rep, "# Study C: deploy time of a port chain over the networking-sfc REST API\n\n")
	fmt.Fprintf(&rep, "sfclab %s, `sfclab serve` on loopback, lab %s (%d forwarders), %d repetitions, flow classifier protocol udp from client-eth0 to server-eth0. ",
		Version, p.Lab, len(e.Functions), e.Repetitions)
	fmt.Fprintf(&rep, "Each step is timed at the client over HTTP (the sum of its requests: 1 flow classifier, n port pairs, n port pair groups, 1 port chain).\n\n")
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Fprintf(&rep, "Host: Linux %s, %d CPUs, journal %s; run %s.\n\n", strings.TrimSpace(string(kernel)), goruntime.NumCPU(), dep.Journal.Root, time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&rep, "Lab on %s.\n\n", where)
	if vm {
		fmt.Fprintf(&rep, "%s\n\n", vmDeployTimeNote(d, labTiming))
	}
	fmt.Fprintf(&rep, "Data plane: **transparent eBPF** — the API answers a port chain create only after the lab's BPF maps steer it, so the PC step includes installing the steering. "+
		"First packet: after the PC answer, UDP probes (every %s, at most %d probes or %s) go from the client's namespace to %s in the server's; the first one that arrives with its TTL lowered by the chain's length has crossed every function of the new chain (a probe that went straight arrives with TTL %d). "+
		"Its arrival is timed from the PC answer and from the PC request's start.\n\n",
		firstpacket.DefaultInterval, firstpacket.DefaultMaxProbes, firstpacket.DefaultTimeout, firstPacketAddr(p), firstpacket.SendTTL)
	if runErr != nil {
		fmt.Fprintf(&rep, "**Incomplete**: %v\n\n", runErr)
	}
	mark := ""
	if vm && d.Emulated() {
		mark = accel.TCGMark
	}
	if err := sfcclient.TableMarked(&rep, samples, mark); err != nil {
		return err
	}
	fmt.Fprintf(&rep, "\nPublished (study C, Borsatti et al., OpenStack with networking-sfc on CloudLab, OVS, section V and Fig. 5): a few seconds per chain, growing by about 0.5 s per added function, most of it in the port-chain step. The figure's bars are not given as numbers, so only the slope is compared. The study gives no figure for the time until the first packet crosses a new chain.\n")
	fmt.Fprintf(&rep, "\n## Beside the real networking-sfc server\n\n")
	fmt.Fprintf(errOut, "study C deploy time: the same chains against the real networking-sfc server\n")
	theirs, oerr := oracleDeployTime(ctx, e, c.Endpoint, p.Lab)
	if len(theirs) == 0 {
		fmt.Fprintf(&rep, "**Not measured**: %v\n", oerr)
	} else {
		fmt.Fprintf(&rep, "The same sequence of requests, in the same run, against the real networking-sfc server on this host (Debian's neutron-server %s with networking-sfc's dummy drivers: control plane only, nothing is steered; SQLite database; the lab's ports mirrored into it with their names and device ids), beside `sfclab serve` programming the eBPF data plane. Means over the repetitions, ms.\n\n", oracle.Version())
		if oerr != nil {
			fmt.Fprintf(&rep, "**Incomplete**: %v\n\n", oerr)
		}
		if err := sfcclient.CompareTable(&rep, samples, theirs, "sfclab serve (eBPF data plane)", "networking-sfc (dummy driver)"); err != nil {
			return err
		}
	}
	var csv bytes.Buffer
	if err := sfcclient.CSV(&csv, samples); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "report.md"), rep.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "samples.csv"), csv.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write samples: %w", err)
	}
	if _, err := cmd.OutOrStdout().Write(rep.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(errOut, "report: %s\n", filepath.Join(out, "report.md"))
	if n := len(rec.Installed()); n != 0 {
		return errors.Join(runErr, fmt.Errorf("%d chains were left in the data plane", n))
	}
	return runErr
}

// Parts of study C's reproduction (`sfclab reproduce openstack-sfc --part`).
const (
	partDataPlane  = "data-plane"
	partDeployTime = "deploy-time"
)

// reproduceOpenStackSFC runs study C: the data plane (Table I, Table II, Fig. 6 and the tap on
// four emulated hosts, with the same chains on one host, transparent and routed) as a bench
// experiment whose report lands in --out, then the REST deploy-time experiment, whose report
// lands in --out/deploy-time (in --out itself with --part deploy-time). With --runtime
// kubernetes both parts run on the cluster: the data plane with the study's hosts placed on
// its nodes (kubernetesPlacement), the deploy-time lab's pods on this machine's node.
func reproduceOpenStackSFC(cmd *cobra.Command, o *overrides, part string, quick, standard bool, runtime string, scenarios []string) error {
	switch {
	case len(scenarios) > 0 && part == partDeployTime:
		return fmt.Errorf("reproduce %s --scenario: it selects data-plane scenarios, and --part %s runs none; leave out --part or --scenario", openstackSFC, partDeployTime)
	case part != "" && part != partDataPlane && part != partDeployTime:
		return fmt.Errorf("reproduce %s: --part %q: use %s or %s (default: both)", openstackSFC, part, partDataPlane, partDeployTime)
	case standard:
		return fmt.Errorf("reproduce %s: it has no --standard scale; run it in full (about 25 minutes) or --quick", openstackSFC)
	case runtime != "" && runtime != "netns" && runtime != spec.RuntimeVM && runtime != spec.RuntimeKubernetes && part != partDataPlane: // vm: refused by Load with what to do
		return fmt.Errorf("reproduce %s --runtime %s: only its data plane runs on %s (--part %s): the deploy-time lab's functions have both ports on one network of one host, which Docker's networks cannot give (the engine connects a container to a network once)", openstackSFC, runtime, runtime, partDataPlane)
	case part == partDeployTime && o.duration != 0:
		return fmt.Errorf("reproduce %s --part %s: the deploy-time experiment has no iperf3 duration", openstackSFC, partDeployTime)
	case runtime == spec.RuntimeVM && part == partDeployTime:
		// Before, this ran the lab on namespaces (runtime vm was not passed on), and a user
		// who asked for VMs got namespace figures.
		return fmt.Errorf("reproduce %s --runtime vm --part %s: --runtime vm is not how it runs VMs; run `sfclab reproduce %s --vm --part %s` (its functions as VMs, client and server namespaces)", openstackSFC, partDeployTime, openstackSFC, partDeployTime)
	}
	if part == partDeployTime {
		return runOpenStackSFC(cmd, quick, o.out, o.repetitions, runtime, false, accel.Decision{})
	}
	st, err := studies.Get(openstackSFC)
	if err != nil {
		return err
	}
	scale := studies.Full
	if quick {
		scale = studies.Quick
	}
	var each func(*spec.Lab) error
	placement := ""
	if runtime == spec.RuntimeKubernetes {
		m, say, err := kubernetesPlacement(cmd.Context())
		if err != nil {
			return err
		}
		each = func(l *spec.Lab) error { return placeHosts(l, m) }
		placement = say
		fmt.Fprintf(cmd.ErrOrStderr(), "reproduce %s --runtime kubernetes: %s\n", openstackSFC, say)
	}
	e, inputs, err := st.LoadEach(scale, runtime, each)
	if err != nil {
		return err
	}
	e.Placement = placement
	if err := keepScenarios(e, scenarios); err != nil {
		return err
	}
	if err := runExperiment(cmd, e, o, bench.Files(inputs)); err != nil || part == partDataPlane {
		return err
	}
	// Deploy time keeps its own repetitions (10, or 2 quick) unless --repetitions says otherwise.
	return runOpenStackSFC(cmd, quick, filepath.Join(o.out, "deploy-time"), o.repetitions, runtime, false, accel.Decision{})
}

// reproduceOpenStackSFCVM runs study C with its functions as VMs (--vm), as the study's VNFs
// were: the data plane, every scenario, transparent and routed, on runtime vm, gated as study
// B's KVM column (TCG only with --allow-tcg, every figure marked), then the deploy-time
// experiment with the lab's functions booted as guests before the API is served (its report
// marked alike). --part runs one of them.
func reproduceOpenStackSFCVM(cmd *cobra.Command, o *overrides, part string, quick, standard bool, runtime string, allowTCG bool) error {
	switch {
	case runtime != "" && runtime != spec.RuntimeVM:
		return fmt.Errorf("reproduce %s --vm: the functions run on runtime vm; leave out --runtime %s", openstackSFC, runtime)
	case part != "" && part != partDataPlane && part != partDeployTime:
		return fmt.Errorf("reproduce %s: --part %q: use %s or %s (default: both)", openstackSFC, part, partDataPlane, partDeployTime)
	case standard:
		return fmt.Errorf("reproduce %s: it has no --standard scale; run it in full or --quick", openstackSFC)
	case part == partDeployTime && o.duration != 0:
		return fmt.Errorf("reproduce %s --part %s: the deploy-time experiment has no iperf3 duration", openstackSFC, partDeployTime)
	}
	d := accel.Host()
	if err := studies.VMFunctionsAllowed(allowTCG, d); err != nil {
		return err
	}
	if part == partDeployTime {
		return runOpenStackSFC(cmd, quick, o.out, o.repetitions, "", true, d)
	}
	st, err := studies.Get(openstackSFC)
	if err != nil {
		return err
	}
	scale := studies.Full
	if quick {
		scale = studies.Quick
	}
	e, inputs, err := st.Load(scale, "")
	if err != nil {
		return err
	}
	if err := st.VMFunctions(e, inputs); err != nil {
		return err
	}
	// Allowed above; runtime "" keeps every scenario, those with no function (on namespaces)
	// among them.
	if err := st.VMScenarios(e, "", allowTCG, d); err != nil {
		return err
	}
	if err := runExperiment(cmd, e, o, bench.Files(inputs)); err != nil || part == partDataPlane {
		return err
	}
	// Deploy time keeps its own repetitions (10, or 2 quick) unless --repetitions says otherwise.
	return runOpenStackSFC(cmd, quick, filepath.Join(o.out, "deploy-time"), o.repetitions, "", true, d)
}

// studyHosts are the hosts of study C's Fig. 3, in the order they are mapped onto nodes.
var studyHosts = []string{"contr01", "comp02", "comp03", "comp04"}

// kubernetesPlacement maps study C's four hosts (Fig. 3) onto the kubernetes runtime's
// cluster: host i goes to node i mod N of the cluster's nodes in name order, so with four or
// more nodes each host is a node of its own, and with fewer some share one (the hosts then
// merge into one emulated host per node, see placeHosts). It returns the mapping and the
// sentence that says it, for the terminal and the run's environment.
func kubernetesPlacement(ctx context.Context) (map[string]string, string, error) {
	nodes, err := kubernetes.Runtime{}.Nodes(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("reproduce %s --runtime kubernetes: %w", openstackSFC, err)
	}
	if len(nodes) == 0 {
		return nil, "", fmt.Errorf("reproduce %s --runtime kubernetes: the cluster has no nodes", openstackSFC)
	}
	m, say := hostMapping(nodes)
	return m, say, nil
}

// hostMapping maps studyHosts onto nodes (at least one) round-robin, and says so.
func hostMapping(nodes []string) (map[string]string, string) {
	m := map[string]string{}
	var pairs []string
	for i, h := range studyHosts {
		m[h] = nodes[i%len(nodes)]
		pairs = append(pairs, h+"->"+m[h])
	}
	how := "one node each"
	if len(nodes) < len(studyHosts) {
		how = "round-robin in name order, hosts on one node merged into one emulated host, so their hops do not cross nodes as in Fig. 3"
	}
	return m, fmt.Sprintf("the study's four hosts on %d node(s) (%s): %s", len(nodes), how, strings.Join(pairs, ", "))
}

// placeHosts renames the hosts of lab by m (study host -> Kubernetes node): hosts mapped to
// the same node become one host, the first's.
func placeHosts(lab *spec.Lab, m map[string]string) error {
	if len(lab.Hosts) == 0 {
		return nil
	}
	var hs []*spec.HostSpec
	seen := map[string]bool{}
	for _, h := range lab.Hosts {
		n, ok := m[h.Name]
		if !ok {
			return fmt.Errorf("place lab %s on the cluster: host %s is not one of the study's (%s)", lab.Name, h.Name, strings.Join(studyHosts, ", "))
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		c := *h
		c.Name = n
		hs = append(hs, &c)
	}
	lab.Hosts = hs
	for _, e := range lab.Endpoints {
		if e != nil && e.Host != "" {
			e.Host = m[e.Host]
		}
	}
	for _, f := range lab.Functions {
		if f != nil && f.Host != "" {
			f.Host = m[f.Host]
		}
	}
	if errs := spec.Validate(lab); len(errs) > 0 {
		return fmt.Errorf("place lab %s on the cluster: %w", lab.Name, errs)
	}
	return nil
}

// keepScenarios keeps only e's scenarios named in names (--scenario); unknown names are
// refused with the scenarios there are. The run's reduction says which ran.
func keepScenarios(e *experiment.Experiment, names []string) error {
	if len(names) == 0 {
		return nil
	}
	var kept []*experiment.Scenario
	for _, n := range names {
		sc := e.Scenario(n)
		if sc == nil {
			var all []string
			for _, s := range e.Scenarios {
				all = append(all, s.Name)
			}
			return fmt.Errorf("reproduce %s --scenario %s: no such scenario; it has %s", openstackSFC, n, strings.Join(all, ", "))
		}
		kept = append(kept, sc)
	}
	e.Scenarios = kept
	if e.Scenario(e.Baseline) == nil {
		e.Baseline = kept[0].Name
	}
	e.Reduced = strings.TrimSuffix(e.Reduced, ".") + "; only scenarios " + strings.Join(names, ", ") + " (--scenario)"
	return nil
}

// oracleDeployTime runs experiment e again against the real networking-sfc server
// (internal/oracle: control plane only, networking-sfc's dummy drivers), with the ports of
// lab, as the API at ours serves them, mirrored into it. The oracle is stopped before it
// returns.
func oracleDeployTime(ctx context.Context, e *sfcclient.DeployTime, ours, lab string) ([]sfcclient.Sample, error) {
	if err := oracle.Available(); err != nil {
		return nil, err
	}
	o, err := oracle.Start(ctx)
	if err != nil {
		return nil, err
	}
	defer o.Stop()
	if _, err := o.Mirror(ctx, ours, "?sfclab%3Alab="+url.QueryEscape(lab)); err != nil {
		return nil, err
	}
	oe := *e
	oe.Lab, oe.FirstPacket, oe.Progress = "", nil, nil // the oracle has one lab's ports and no data plane
	return oe.Run(ctx, &sfcclient.Client{Endpoint: o.URL})
}
