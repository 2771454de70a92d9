package studies

import (
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/report"
)

// ReferenceB cites study B. The figures are those of the authors' slides of the talk.
const ReferenceB = `R. S. Eiras, R. S. Couto, M. G. Rubinstein, "Performance Evaluation of a Virtualized HTTP Proxy in KVM and Docker", 7th International Conference on the Network of the Future (NOF), 2016`

// studyB is Eiras, Couto, Rubinstein: a Squid HTTP proxy in native Linux, Docker (routed and
// NAT) and KVM; seconds for 10,000 requests, mean ± 95 % CI of 10 repetitions.
var studyB = &Study{
	Name:       "http-proxy",
	Title:      "B. Virtualized HTTP proxy in KVM and Docker (Eiras, Couto, Rubinstein)",
	Experiment: "experiments/http-proxy.yaml",
	VMColumn:   true,
	Published: &report.Published{
		Study:     "B. Virtualized HTTP proxy in KVM and Docker (Eiras, Couto, Rubinstein)",
		Reference: ReferenceB,
		Claims:    claimsB,
		// The slides give seconds for 10,000 requests in every cell.
		HTTPRequests: 10000,
		Source:       "the study's slides: Squid 3, Apache 2 origin, ab, 10,000 requests, 12 fork processes of background load on the proxy's server, 10 repetitions, mean ± 95 % CI; native = Squid on bare Linux, here the netns runtime (processes on the host kernel in network namespaces)",
		HTTP:         publishedB(),
		// Each platform is compared with native under the same cache setting, so the change
		// is the platform's cost alone.
		HTTPBaselines: map[string]string{
			"docker-routed-cache": "native-cache", "docker-nat-cache": "native-cache", "kvm-cache": "native-cache",
			"docker-routed-nocache": "native-nocache", "docker-nat-nocache": "native-nocache", "kvm-nocache": "native-nocache",
		},
		Notes: []string{
			"KVM: Squid in a QEMU guest (microvm, 1 vCPU, 512 MiB, virtio-net, the host's kernel; docs/vm.md), client and origin in namespaces. Where KVM is not usable (the environment's kvm line says why) the column runs only with --allow-tcg, every figure marked \"emulated CPU (TCG): not comparable\"; otherwise its cells say why it is missing.",
			"The study published no figures for 100 concurrent requests with the cache on, nor for 10 MB objects with the cache on.",
			"Background load: the study's 12 busy processes ran on the proxy's server beside it; here they run on this host beside the proxy node (placement host) on both runtimes, in sfclab's own cgroups, so they are not counted as the proxy's CPU and do not share its container's cgroup.",
			"Docker's cost over native depends on the host's cgroup version and Docker's storage driver, both in the environment table of this report (cgroup, docker_storage_driver) as read when the run started: on cgroup v1 every container gets its own group in the cpu controller under /docker (cpu.shares 1024) while netns nodes, sfclab's client and the background processes stay in the root cpu group, so under load the containers share about one process's worth of CPU; on the fuse-overlayfs storage driver a path lookup by a non-root user (Apache serves as www-data) costs far more than by root. sfclab's origin sets AllowOverride None and FollowSymLinks, Debian's stock settings, which leave one open and one stat per request. Development measurements of these effects, with their host and date, are in docs/study-b-development.md, not figures of this run.",
			"Docker NAT: the study's client ran on another machine, so its requests reached Squid through the DNAT rule Docker adds for the published port (kernel NAT and conntrack). sfclab's client sits on the same Docker bridge as the published gateway address, where Docker returns such packets from its nat rules and, with its userland proxy on, lets docker-proxy carry them; sfclab therefore adds its own nat PREROUTING rule for the chain's source, so docker-nat goes through the kernel's DNAT as the study's client did and Squid sees the client's address.",
		},
	},
	Standard: func(e *experiment.Experiment) {
		e.Repetitions = 3
		if h := e.Probes.HTTP; h != nil {
			h.Requests = 10000
			h.ObjectRequests = map[string]int{"1M": 1000, "10M": 100}
		}
		e.Reduced = "standard scale (--standard, one to two hours on two cores): 3 repetitions (the study: 10); " +
			"10,000 requests per run for objects up to 100k as the study, 1,000 for 1M and 100 for 10M (the study: 10,000), " +
			"so for 1M and 10M the published times are compared per request"
	},
	Quick: func(e *experiment.Experiment) {
		e.Repetitions = 2
		if h := e.Probes.HTTP; h != nil {
			h.Requests = 200
			h.Objects = []string{"1k", "10k", "100k", "1M"}
		}
		if b := e.Background; b != nil {
			b.Count = 2
		}
	},
}

// publishedB is study B's table. Columns: native, docker routed, docker NAT, KVM.
func publishedB() []report.PublishedHTTP {
	type cell struct{ s, ci float64 }
	rows := []struct {
		cache       bool
		concurrency int
		object      string
		v           [4]cell
	}{
		{false, 1, "1k", [4]cell{{6.98, 0.02}, {7.48, 0.02}, {7.48, 0.02}, {9.24, 0.27}}},
		{false, 1, "10k", [4]cell{{7.76, 0.02}, {8.35, 0.02}, {8.35, 0.02}, {11.68, 0.60}}},
		{false, 1, "100k", [4]cell{{15.81, 0.02}, {17.28, 0.03}, {17.29, 0.03}, {32.53, 1.99}}},
		{false, 1, "1M", [4]cell{{97.41, 0.03}, {98.96, 0.16}, {99.06, 0.17}, {370.74, 11.81}}},
		{false, 1, "10M", [4]cell{{903.63, 0.29}, {913.93, 0.80}, {914.76, 0.83}, {2363.48, 30.11}}},
		{false, 100, "1k", [4]cell{{2.05, 0.01}, {2.38, 0.01}, {2.49, 0.01}, {3.33, 0.02}}},
		{false, 100, "10k", [4]cell{{2.07, 0.01}, {2.52, 0.01}, {2.78, 0.01}, {4.05, 0.03}}},
		{false, 100, "100k", [4]cell{{8.66, 0.05}, {8.53, 0.03}, {8.70, 0.04}, {16.99, 0.15}}},
		{false, 100, "1M", [4]cell{{87.98, 1.52}, {87.85, 1.63}, {87.93, 1.65}, {172.68, 1.05}}},
		{false, 100, "10M", [4]cell{{878.06, 20.26}, {877.83, 19.06}, {877.75, 19.02}, {1483.23, 12.17}}},
		{true, 1, "1k", [4]cell{{3.28, 0.01}, {3.76, 0.01}, {3.77, 0.01}, {14.59, 1.22}}},
		{true, 1, "10k", [4]cell{{3.84, 0.01}, {4.24, 0.01}, {4.21, 0.01}, {17.88, 1.38}}},
		{true, 1, "100k", [4]cell{{12.8, 1.86}, {13.37, 3.16}, {13.60, 3.17}, {24.91, 3.01}}},
		{true, 1, "1M", [4]cell{{92.96, 3.12}, {93.54, 3.76}, {93.58, 3.86}, {106.68, 3.98}}},
	}
	platforms := [4]string{"native", "docker-routed", "docker-nat", "kvm"}
	var out []report.PublishedHTTP
	for _, r := range rows {
		suffix := "-nocache"
		if r.cache {
			suffix = "-cache"
		}
		for i, p := range platforms {
			row := report.PublishedHTTP{Scenario: p + suffix, Object: r.object, Concurrency: r.concurrency, Seconds: r.v[i].s, CI: r.v[i].ci}
			out = append(out, row)
		}
	}
	return out
}
