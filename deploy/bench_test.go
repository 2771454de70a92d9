package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
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
	lab, err := spec.Decode([]byte(yaml), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	p, err := plan.Build(lab)
	if err != nil {
		b.Fatal(err)
	}
	d := &Deployer{Journal: Journal{Root: b.TempDir()}}
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
