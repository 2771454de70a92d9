package apiplane

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/sfclab/sfclab/api/sfcclient"
	"github.com/sfclab/sfclab/steer"
)

// chainOf is study C's description of a chain of n functions of an apiLab.
func chainOf(lab string, n int) *sfcclient.ChainFile {
	f := &sfcclient.ChainFile{Source: "client", Destination: "server", MatchFields: map[string]any{"protocol": "udp"}, Lab: lab}
	for i := 1; i <= n; i++ {
		f.Chain = append(f.Chain, sfcclient.Element{Name: fmt.Sprintf("f%d", i), Direction: sfcclient.DirOut})
	}
	return f
}

// BenchmarkChain6BPF deploys a 6-function chain over the API in study C's four steps (1 FC,
// 6 PP, 6 PPG, 1 PC: 14 requests) on a deployed transparent lab, the port chain written to
// the lab's BPF maps before the API answers, and removes it. Reported: the deploy time
// (target <= 50 ms), the port-chain step per function (target <= 5 ms), and the time until
// the first UDP packet crossed the chain after the PC answer.
func BenchmarkChain6BPF(b *testing.B) {
	l := deployAPILab(b, "api-b6", 6)
	pr := l.probe(b)
	c := &sfcclient.Client{Endpoint: l.url, HTTP: l.hc}
	ctx := context.Background()
	f := chainOf(l.p.Lab, 6)
	var total, pc, first time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := c.Apply(ctx, f, "b6")
		if err != nil {
			b.Fatal(err)
		}
		total += d.Total()
		pc += d.Times[3]
		b.StopTimer()
		r, err := pr.Run(ctx, 6)
		if err != nil {
			b.Fatal(err)
		}
		first += r.Arrived.Sub(d.ChainAnswered)
		if err := c.Remove(ctx, d); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(total.Seconds()*1000/n, "ms/chain")
	b.ReportMetric(pc.Seconds()*1000/n/6, "ms-PC/function")
	b.ReportMetric(first.Seconds()*1000/n, "ms-first-packet")
	b.ReportMetric(total.Seconds()*1000/n/50, "x-target-50ms")
}

// BenchmarkPortChainStepBPF times the port-chain step alone (with its BPF map update) for
// chains of 1 and 10 functions.
func BenchmarkPortChainStepBPF(b *testing.B) {
	l := deployAPILab(b, "api-bpc", 10)
	c := &sfcclient.Client{Endpoint: l.url, HTTP: l.hc}
	ctx := context.Background()
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("functions=%d", n), func(b *testing.B) {
			f := chainOf(l.p.Lab, n)
			var pc time.Duration
			for i := 0; i < b.N; i++ {
				d, err := c.Apply(ctx, f, "bpc")
				if err != nil {
					b.Fatal(err)
				}
				pc += d.Times[3]
				if err := c.Remove(ctx, d); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(pc.Seconds()*1000/float64(b.N), "ms-PC")
			b.ReportMetric(pc.Seconds()*1000/float64(b.N)/float64(n), "ms-PC/function")
		})
	}
}

// steerPrograms counts the steering programs loaded in the kernel.
// Equivalent to: bpftool prog show | grep -c steer_
func steerPrograms(tb testing.TB) int {
	n := 0
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			return n
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		if info, err := p.Info(); err == nil && (info.Name == "steer_port" || info.Name == "steer_tunnel") {
			n++
		}
		p.Close()
	}
}

// BenchmarkChurn100 creates and deletes 100 chains (of 1..6 functions, four REST steps each)
// per iteration over the API on a deployed transparent lab, and checks that nothing stays
// behind: every BPF map of the lab holds as many entries as before (counted by iterating
// the maps), the kernel holds as many steering programs, and the process as many goroutines.
func BenchmarkChurn100(b *testing.B) {
	l := deployAPILab(b, "api-churn", 6)
	c := &sfcclient.Client{Endpoint: l.url, HTTP: l.hc}
	ctx := context.Background()
	entries := func() map[string]int {
		dp, err := steer.Open(l.p.Lab)
		if err != nil {
			b.Fatal(err)
		}
		defer dp.Close()
		m, err := dp.MapEntries()
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	settle := func() int {
		l.hc.CloseIdleConnections()
		time.Sleep(100 * time.Millisecond) // let the server's connection goroutines end
		return runtime.NumGoroutine()
	}
	before, progs, goroutines := entries(), steerPrograms(b), settle()
	var peak int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < 100; k++ {
			d, err := c.Apply(ctx, chainOf(l.p.Lab, 1+k%6), fmt.Sprintf("churn-%d-%d", i, k))
			if err != nil {
				b.Fatal(err)
			}
			if k == 99 {
				b.StopTimer()
				peak = entries()["hops"]
				b.StartTimer()
			}
			if err := c.Remove(ctx, d); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	after := entries()
	if !maps.Equal(before, after) {
		b.Errorf("map entries after %d chains created and deleted: %v, before: %v", 100*b.N, after, before)
	}
	if p := steerPrograms(b); p != progs {
		b.Errorf("steering programs: %d after, %d before", p, progs)
	}
	g := settle()
	if g > goroutines {
		b.Errorf("goroutines: %d after, %d before", g, goroutines)
	}
	left := 0
	for _, v := range after {
		left += v
	}
	b.ReportMetric(float64(peak), "hop-entries-with-a-chain")
	b.ReportMetric(float64(left-sum(before)), "map-entries-left")
	b.ReportMetric(float64(steerPrograms(b)-progs), "programs-left")
	b.ReportMetric(float64(g-goroutines), "goroutines-left")
	b.ReportMetric(b.Elapsed().Seconds()*1000/float64(100*b.N), "ms/chain-create+delete")
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
