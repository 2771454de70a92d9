package pktgen

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestSendThreads: two sending threads, one per CPU, each report what they sent, and the
// receiver's counter sees their sum (no rate is asserted: the machine is shared).
func TestSendThreads(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("SKIPPED LOUDLY: two sending threads need two CPUs; this host has one")
	}
	p, g, f := setup(t, []int{64}, 0, Count)
	var th []Thread
	if err := p.Do(p.A, func() (err error) { th, err = g.SendThreads(7, 100e3, 200*time.Millisecond, []int{0, 1}); return err }); err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, x := range th {
		sum += x.Sent
	}
	c := settled(t, func() (Counts, error) { return f.Counts(7) }, sum)
	for i, x := range th {
		t.Logf("thread on CPU %d: %d frames in %s, %.0f pps", x.CPU, x.Sent, x.Took, x.Rate())
		if x.CPU != i || x.Sent == 0 || x.Took <= 0 {
			t.Errorf("thread %d: %+v", i, x)
		}
	}
	if c.Packets != sum {
		t.Errorf("threads sent %d, the counter saw %d", sum, c.Packets)
	}
	if _, err := g.SendThreads(8, 0, time.Millisecond, nil); err == nil {
		t.Error("no CPU accepted")
	}
}

// threadTrial numbers the benchmark's trials: the benchmark function runs more than once
// (b.N 1, then more), and a counter sums every run of one trial id.
var threadTrial uint32 = 1000

// BenchmarkGeneratorThreads reports the unpaced rate of 64-byte frames over a direct veth
// pair from one thread (CPU 0) and from two (CPUs 0 and 1), per thread and counted.
func BenchmarkGeneratorThreads(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("two CPUs needed")
	}
	p, g, f := setup(b, []int{64}, 0, Count)
	for _, cpus := range [][]int{{0}, {0, 1}} {
		b.Run(fmt.Sprintf("%dthreads", len(cpus)), func(b *testing.B) {
			per := make([]float64, len(cpus))
			var counted float64
			for i := 0; i < b.N; i++ {
				threadTrial++
				trial := threadTrial
				var th []Thread
				if err := p.Do(p.A, func() (err error) { th, err = g.SendThreads(trial, 0, time.Second, cpus); return err }); err != nil {
					b.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond)
				c, _ := f.Counts(trial)
				for j, x := range th {
					per[j] += x.Rate() / float64(b.N)
				}
				counted += float64(c.Packets) / th[0].Took.Seconds() / float64(b.N)
			}
			for j := range per {
				b.ReportMetric(per[j]/1e6, fmt.Sprintf("Mpps-cpu%d", cpus[j]))
			}
			b.ReportMetric(counted/1e6, "Mpps-counted")
		})
	}
}
