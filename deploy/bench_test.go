package deploy

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sfclab/sfclab/internal/labgen"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// chainLab generates a lab of n forwarders in a row (n+2 nodes).
func chainLab(name string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nendpoints: {client: {}, server: {}}\nfunctions:\n", name)
	var hops []string
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  f%d: {kind: forwarder}\n", i)
		hops = append(hops, fmt.Sprintf("f%d", i))
	}
	fmt.Fprintf(&b, "chains: [{from: client, to: server, hops: [%s]}]\n", strings.Join(hops, ", "))
	return b.String()
}

// benchDeploy measures deploy and destroy of one lab, reported as ms per operation and the
// marginal cost per function node.
func benchDeploy(b *testing.B, yaml string, functions int) {
	if testing.Short() {
		b.Skip("deploy benchmarks build real namespaces")
	}
	lab, err := spec.Decode([]byte(yaml), "bench.yaml", kinds.Spec())
	if err != nil {
		b.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		b.Fatal(err)
	}
	d := &Deployer{Journal: journal.Journal{Root: b.TempDir()}}
	var deployT, destroyT time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := d.Deploy(context.Background(), p, "bench"); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := d.Destroy(context.Background(), p.Lab); err != nil {
			b.Fatal(err)
		}
		deployT += t1.Sub(t0)
		destroyT += time.Since(t1)
	}
	b.ReportMetric(float64(deployT.Milliseconds())/float64(b.N), "deploy-ms")
	b.ReportMetric(float64(destroyT.Milliseconds())/float64(b.N), "destroy-ms")
	if functions > 0 {
		b.ReportMetric(float64(deployT.Microseconds())/1000/float64(b.N)/float64(len(p.Nodes)), "deploy-ms/node")
	}
}

func BenchmarkDeployChain6(b *testing.B) {
	requireRoot(b)
	benchDeploy(b, chainLab("bench-c6", 6), 6)
}

func BenchmarkDeployChain0(b *testing.B) {
	requireRoot(b)
	benchDeploy(b, chainLab("bench-c0", 0), 0)
}

func BenchmarkDeploy200Nodes(b *testing.B) {
	requireRoot(b)
	benchDeploy(b, chainLab("bench-200", 198), 198)
}

// Benchmark1000Nodes deploys and destroys a generated lab of 1,000 nodes (5 chains of 190
// forwarders and a fan-out group of 8) and reports, besides deploy and destroy time per node,
// the memory sfclab holds: the Go heap in use once the lab is up and the process's peak RSS.
//
// Run: flock /tmp/sfclab-suite.lock go test -run '^$' -bench 1000Nodes -benchtime 1x ./deploy/
func Benchmark1000Nodes(b *testing.B) {
	requireRoot(b)
	yaml := labgen.Big("bench-1k", 5, 190, 8)
	lab, err := spec.Decode([]byte(yaml), "bench.yaml", kinds.Spec())
	if err != nil {
		b.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		b.Fatal(err)
	}
	if len(p.Nodes) != 1000 {
		b.Fatalf("generated lab has %d nodes, want 1000", len(p.Nodes))
	}
	d := &Deployer{Journal: journal.Journal{Root: b.TempDir()}}
	var deployT, destroyT time.Duration
	var heap uint64
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		timing, err := d.Deploy(context.Background(), p, "bench")
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		b.Logf("deploy %s", timing)
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		heap = max(heap, ms.HeapInuse)
		if err := d.Destroy(context.Background(), p.Lab); err != nil {
			b.Fatal(err)
		}
		deployT += t1.Sub(t0)
		destroyT += time.Since(t1)
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	n := float64(b.N)
	b.ReportMetric(deployT.Seconds()/n, "deploy-s")
	b.ReportMetric(destroyT.Seconds()/n, "destroy-s")
	b.ReportMetric(float64(deployT.Microseconds())/1000/n/1000, "deploy-ms/node")
	b.ReportMetric(float64(destroyT.Microseconds())/1000/n/1000, "destroy-ms/node")
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(ru.Maxrss)/1024, "maxrss-MiB")
}
