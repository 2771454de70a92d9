package docker_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	httpprobe "github.com/sfclab/sfclab/probe/http"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/runtime/docker"
	"github.com/sfclab/sfclab/spec"
)

// brNFCall is the host switch that sends bridged IPv4 frames through the host's iptables
// (br_netfilter).
const brNFCall = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// splitComment tags every rule BenchmarkDockerHTTPSplit adds, so they can be found and
// removed.
const splitComment = "sfclab-bench-http-split"

// splitVariant is one way of running the docker lab with one cause of its extra
// per-request cost removed.
type splitVariant struct {
	name string
	// on and off apply and remove the variant on the docker lab (nil: nothing to do).
	on, off func(b *testing.B)
}

// BenchmarkDockerHTTPSplit splits what Docker routed costs per HTTP request over netns, study
// B's cell without background load (1,000 requests of 1k at concurrency 1 through Squid,
// cache off, to Apache): both labs stay deployed and every repetition runs, in turn, each
// variant below on the docker lab with a netns run beside it:
//
//   - docker: as deployed;
//   - host-notrack: a raw-table NOTRACK rule for the lab's bridges in the host (no host
//     conntrack for the lab's frames; br_netfilter still sends them through iptables);
//   - no-br-nf: the host's net.bridge.bridge-nf-call-iptables set to 0 (bridged frames skip
//     the host's iptables and conntrack altogether; restored afterwards, whatever happens);
//   - ctr-notrack: NOTRACK in each container's own namespace, where Docker's embedded DNS
//     rules (nat table) make conntrack track every connection;
//   - all: the three at once;
//   - host-cgroups: every process of the containers moved, in every cgroup v1 hierarchy, out
//     of the container's group (docker/ID) into the groups the netns lab's processes are in
//     (those of this process: the root cpu group, the memory group it was started in), and
//     back afterwards;
//   - old-origin (on both labs): the origin's Apache configuration as it was before this
//     benchmark found its path walks (no `<Directory />` section: Apache tried to open
//     .htaccess in the 7 directories above the document root on every request; and Options
//     None on the document root), applied by a graceful restart: each such walk crosses the
//     container's root, on this engine fuse-overlayfs, as a non-root user.
//
// It logs the median request time and its phases (connect, wait for the first byte, body,
// close) per variant and reports each variant's docker/netns ratio of the median request
// time. It also checks that Squid writes nothing per request (cache.log on the bind-mounted
// node directory, nothing in the container's own filesystem: docker diff).
//
//	flock -o /tmp/sfclab-suite.lock go test ./runtime/docker -run '^$' -bench DockerHTTPSplit -benchtime 3x
func BenchmarkDockerHTTPSplit(b *testing.B) {
	requireEngine(b)
	if _, err := os.Stat(brNFCall); err != nil {
		b.Skipf("SKIPPED LOUDLY: no br_netfilter on this host (%v): docker bridges do not pass the host's iptables", err)
	}
	ctx := context.Background()
	labs := map[string]*plan.Plan{}
	deployers := map[string]*deploy.Deployer{}
	nodes := map[string]probe.Env{}
	for _, rt := range []string{"netns", "docker"} {
		d := deployer(b)
		p := loadLab(b, "../../experiments/labs/http-nocache.yaml", "m-hs-"+rt[:2], func(l *spec.Lab) { l.Runtime = rt })
		if _, err := d.Deploy(ctx, p, "measure"); err != nil {
			b.Fatalf("deploy http-nocache on %s: %v", rt, err)
		}
		b.Cleanup(func() {
			if err := d.Destroy(context.Background(), p.Lab); err != nil {
				b.Errorf("destroy %s: %v", p.Lab, err)
			}
		})
		labs[rt], deployers[rt] = p, d
		nodes[rt] = probe.Env{Plan: p, Chain: p.Chains[0], Node: func(name string) (probe.Node, error) { return d.Node(p, name) }}
	}
	dk := labs["docker"]
	bridges := labBridges(b, dk.Lab)
	var pids []int
	var ids []string
	for _, n := range dk.Nodes {
		node, err := nodes["docker"].Node(n.Name)
		if err != nil {
			b.Fatal(err)
		}
		pids = append(pids, node.(*docker.Node).PID)
		ids = append(ids, node.(*docker.Node).ID)
	}
	cg := &cgroupMover{ids: ids}
	b.Cleanup(func() { cg.back(b) })
	orig, err := os.ReadFile(brNFCall)
	if err != nil {
		b.Fatal(err)
	}
	restoreBrNF := func() {
		if err := os.WriteFile(brNFCall, orig, 0o644); err != nil {
			b.Errorf("RESTORE BY HAND: echo %s > %s: %v", strings.TrimSpace(string(orig)), brNFCall, err)
		}
	}
	b.Cleanup(restoreBrNF)
	b.Cleanup(func() { removeSplitRules(b, pids) })

	hostNotrack := func(add bool) func(*testing.B) {
		return func(b *testing.B) {
			for _, br := range bridges {
				ipt(b, 0, add, "raw", "PREROUTING", "-i", br, "-m", "comment", "--comment", splitComment, "-j", "NOTRACK")
			}
		}
	}
	ctrNotrack := func(add bool) func(*testing.B) {
		return func(b *testing.B) {
			for _, pid := range pids {
				for _, chain := range []string{"PREROUTING", "OUTPUT"} {
					ipt(b, pid, add, "raw", chain, "-m", "comment", "--comment", splitComment, "-j", "NOTRACK")
				}
			}
		}
	}
	brNF := func(v string) func(*testing.B) {
		return func(b *testing.B) {
			if err := os.WriteFile(brNFCall, []byte(v), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	variants := []splitVariant{
		{name: "docker"},
		{name: "host-notrack", on: hostNotrack(true), off: hostNotrack(false)},
		{name: "no-br-nf", on: brNF("0"), off: func(*testing.B) { restoreBrNF() }},
		{name: "ctr-notrack", on: ctrNotrack(true), off: ctrNotrack(false)},
		{name: "all", on: func(b *testing.B) { hostNotrack(true)(b); brNF("0")(b); ctrNotrack(true)(b) },
			off: func(b *testing.B) { hostNotrack(false)(b); restoreBrNF(); ctrNotrack(false)(b) }},
		{name: "host-cgroups", on: cg.out, off: cg.back},
		{name: "old-origin", on: func(b *testing.B) {
			for rt, p := range labs {
				oldOrigin(b, deployers[rt].Journal.NodeDir(p.Lab)+"/origin.www", true)
			}
		}, off: func(b *testing.B) {
			for rt, p := range labs {
				oldOrigin(b, deployers[rt].Journal.NodeDir(p.Lab)+"/origin.www", false)
			}
		}},
	}

	// Squid's directory: in the node directory the containers bind-mount (see httpproxy.Dir).
	proxyDir := deployers["docker"].Journal.NodeDir(dk.Lab) + "/proxy.squid"
	logBefore := fileSize(proxyDir + "/cache.log")
	diffBefore := dockerDiff(b, "sfc."+dk.Lab+".proxy")

	cfg := httpprobe.Config{Requests: 1000, Concurrency: 1, Object: "1k", Timeout: 10 * time.Second, Deadline: time.Minute}
	// per variant and runtime: the median request time and phase medians of every run
	type runFig struct{ median, connect, wait, body, close float64 }
	figs := map[string][]runFig{}
	run := func(rt string) runFig {
		var times []float64
		var f runFig
		err := httpprobe.New(cfg).Run(ctx, nodes[rt], func(x results.Sample) {
			switch {
			case x.Metric == "request_time":
				times = append(times, x.Value)
			case x.Metric == "phase_median":
				switch x.Labels["phase"] {
				case "connect":
					f.connect = x.Value
				case "wait":
					f.wait = x.Value
				case "body":
					f.body = x.Value
				case "close":
					f.close = x.Value
				}
			}
		})
		if err != nil {
			b.Fatalf("http probe on %s: %v", rt, err)
		}
		if len(times) != cfg.Requests {
			b.Fatalf("http probe on %s: %d answered of %d", rt, len(times), cfg.Requests)
		}
		f.median = median(times)
		return f
	}
	// Warm both (Squid and Apache start their workers on first use).
	run("netns")
	run("docker")
	for i := 0; i < b.N; i++ {
		// Rotate the order so no variant always runs first.
		for k := range variants {
			v := variants[(k+i)%len(variants)]
			if v.on != nil {
				v.on(b)
			}
			figs[v.name+"/netns"] = append(figs[v.name+"/netns"], run("netns"))
			figs[v.name+"/docker"] = append(figs[v.name+"/docker"], run("docker"))
			if v.off != nil {
				v.off(b)
			}
		}
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("host load average at the end: %s", strings.TrimSpace(string(load)))
	}
	logAfter := fileSize(proxyDir + "/cache.log")
	diffAfter := dockerDiff(b, "sfc."+dk.Lab+".proxy")
	b.Logf("Squid's writes over %d requests on docker: cache.log (bind-mounted node directory) %d -> %d bytes; "+
		"container filesystem changes (docker diff) %d -> %d paths: %v",
		(b.N*len(variants)+1)*cfg.Requests, logBefore, logAfter, len(diffBefore), len(diffAfter), diffAfter)

	med := func(fs []runFig, get func(runFig) float64) float64 {
		v := make([]float64, len(fs))
		for i, f := range fs {
			v[i] = get(f)
		}
		return median(v)
	}
	b.Logf("%-13s %-7s %9s %9s %9s %9s %9s  (ms, median over %d runs of each run's median)", "variant", "runtime", "request", "connect", "wait", "body", "close", b.N)
	for _, v := range variants {
		for _, rt := range []string{"netns", "docker"} {
			fs := figs[v.name+"/"+rt]
			b.Logf("%-13s %-7s %9.3f %9.3f %9.3f %9.3f %9.3f", v.name, rt,
				med(fs, func(f runFig) float64 { return f.median }), med(fs, func(f runFig) float64 { return f.connect }),
				med(fs, func(f runFig) float64 { return f.wait }), med(fs, func(f runFig) float64 { return f.body }),
				med(fs, func(f runFig) float64 { return f.close }))
		}
		// Paired per run: docker over the netns run beside it.
		var ratios []float64
		for j, f := range figs[v.name+"/docker"] {
			ratios = append(ratios, f.median/figs[v.name+"/netns"][j].median)
		}
		b.ReportMetric(median(ratios), v.name+"/netns")
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return st.Size()
}

// dockerDiff lists the paths changed in a container's own filesystem (its overlay's upper
// layer).
//
// Equivalent to: docker diff NAME
func dockerDiff(b *testing.B, name string) []string {
	out, err := exec.Command("docker", "diff", name).Output()
	if err != nil {
		b.Fatalf("docker diff %s: %v", name, err)
	}
	return strings.Fields(strings.ReplaceAll(string(out), "\n", " "))
}

// labBridges returns the host bridge devices of a docker lab's networks.
//
// Equivalent to: docker network ls -q --no-trunc --filter label=sfclab.lab=LAB
func labBridges(b *testing.B, lab string) []string {
	out, err := exec.Command("docker", "network", "ls", "-q", "--no-trunc", "--filter", "label=sfclab.lab="+lab).Output()
	if err != nil {
		b.Fatalf("list the networks of %s: %v", lab, err)
	}
	var brs []string
	for _, id := range strings.Fields(string(out)) {
		brs = append(brs, "br-"+id[:12])
	}
	if len(brs) == 0 {
		b.Fatalf("lab %s has no docker networks", lab)
	}
	return brs
}

// ipt inserts (add) or deletes a rule, in the host (pid 0) or in the network namespace of
// process pid.
//
// Equivalent to: [nsenter -t PID -n] iptables -w -t TABLE -I|-D CHAIN RULE...
func ipt(b *testing.B, pid int, add bool, table, chain string, rule ...string) {
	op := "-D"
	if add {
		op = "-I"
	}
	args := append([]string{"iptables", "-w", "-t", table, op, chain}, rule...)
	if pid != 0 {
		args = append([]string{"nsenter", "-t", strconv.Itoa(pid), "-n"}, args...)
	}
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		b.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// removeSplitRules deletes every rule the benchmark may have left (host and containers).
func removeSplitRules(b *testing.B, pids []int) {
	for _, pid := range append([]int{0}, pids...) {
		for _, chain := range []string{"PREROUTING", "OUTPUT"} {
			for {
				args := []string{"iptables", "-w", "-t", "raw", "-S", chain}
				if pid != 0 {
					args = append([]string{"nsenter", "-t", strconv.Itoa(pid), "-n"}, args...)
				}
				out, err := exec.Command(args[0], args[1:]...).Output()
				if err != nil {
					break // the container is gone: its rules with it
				}
				var rule string
				for _, l := range strings.Split(string(out), "\n") {
					if strings.Contains(l, splitComment) {
						rule = l
						break
					}
				}
				if rule == "" {
					break
				}
				del := append(args[:len(args)-2:len(args)-2], append([]string{"-D"}, strings.Fields(rule)[1:]...)...)
				if out, err := exec.Command(del[0], del[1:]...).CombinedOutput(); err != nil {
					b.Errorf("remove %q: %v: %s", rule, err, out)
					break
				}
			}
		}
	}
}

// cgroupMover moves the processes of containers out of their cgroups (v1, every hierarchy)
// into this process's own, and back.
type cgroupMover struct {
	ids   []string
	moved map[string][]string // the container's group directory -> pids moved out of it
	self  map[string]string   // the same -> this process's group directory in its hierarchy
}

// selfGroups maps each cgroup v1 hierarchy directory under /sys/fs/cgroup to this process's
// group in it, from /proc/self/cgroup.
func selfGroups(b *testing.B) map[string]string {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || f[1] == "" {
			continue // the v2 (unified) line
		}
		for _, ctrl := range strings.Split(strings.TrimPrefix(f[1], "name="), ",") {
			dir := "/sys/fs/cgroup/" + ctrl
			if _, err := os.Stat(dir + "/cgroup.procs"); err == nil {
				out[dir] = dir + f[2]
			}
		}
	}
	return out
}

// out moves every process of the containers into this process's groups.
//
// Equivalent to: for each hierarchy H: cat H/docker/ID/cgroup.procs > H/SELF/cgroup.procs (one pid per write)
func (m *cgroupMover) out(b *testing.B) {
	m.moved, m.self = map[string][]string{}, map[string]string{}
	for hier, self := range selfGroups(b) {
		for _, id := range m.ids {
			dir := hier + "/docker/" + id
			data, err := os.ReadFile(dir + "/cgroup.procs")
			if err != nil {
				continue // not in this hierarchy
			}
			m.self[dir] = self
			for _, pid := range strings.Fields(string(data)) {
				if err := os.WriteFile(self+"/cgroup.procs", []byte(pid), 0o644); err != nil {
					b.Fatalf("move process %s from %s to %s: %v", pid, dir, self, err)
				}
				m.moved[dir] = append(m.moved[dir], pid)
			}
		}
	}
}

// back returns the moved processes to their containers' groups (those gone are skipped).
func (m *cgroupMover) back(b *testing.B) {
	for dir, pids := range m.moved {
		for _, pid := range pids {
			if _, err := os.Stat("/proc/" + pid); err != nil {
				continue
			}
			if err := os.WriteFile(dir+"/cgroup.procs", []byte(pid), 0o644); err != nil {
				b.Errorf("return process %s to %s: %v", pid, dir, err)
			}
		}
	}
	m.moved = nil
}

// rootDirectory is the section of the origin's configuration the old-origin variant removes.
const rootDirectory = "<Directory />\n\tOptions FollowSymLinks\n\tAllowOverride None\n\tRequire all denied\n</Directory>\n"

// oldOrigin turns the origin's httpd.conf in dir into the configuration before the path-walk
// fix (on) or back, and restarts Apache gracefully, waiting a second for its new workers.
//
// Equivalent to: edit DIR/httpd.conf; kill -USR1 APACHE_PARENT
func oldOrigin(b *testing.B, dir string, on bool) {
	conf := dir + "/httpd.conf"
	data, err := os.ReadFile(conf)
	if err != nil {
		b.Fatal(err)
	}
	text := string(data)
	docRoot := text[strings.Index(text, "DocumentRoot "):]
	if on {
		if !strings.Contains(text, rootDirectory) {
			b.Fatalf("%s has no section %q", conf, rootDirectory)
		}
		text = strings.Replace(text, rootDirectory, "", 1)
		text = strings.Replace(text, docRoot, strings.Replace(docRoot, "Options FollowSymLinks", "Options None", 1), 1)
	} else {
		text = strings.Replace(text, docRoot, rootDirectory+strings.Replace(docRoot, "Options None", "Options FollowSymLinks", 1), 1)
	}
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	// The pid file holds the pid in the container's pid namespace: find Apache's parent by
	// its command line instead (the apache2 whose parent is not one).
	if err := syscall.Kill(apacheParent(b, conf), syscall.SIGUSR1); err != nil {
		b.Fatalf("graceful restart of apache: %v", err)
	}
	time.Sleep(time.Second)
}

// apacheParent returns the host pid of the Apache parent process started with conf.
func apacheParent(b *testing.B, conf string) int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	set := map[int]bool{}
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(cmd), conf) && strings.Contains(string(cmd), "apache2") {
			set[pid] = true
		}
	}
	for pid := range set {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				if ppid, _ := strconv.Atoi(strings.TrimSpace(v)); !set[ppid] {
					return pid
				}
			}
		}
	}
	b.Fatalf("no apache2 process runs %s", conf)
	return 0
}
