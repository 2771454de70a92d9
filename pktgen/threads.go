package pktgen

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Thread is what one sending thread of SendThreads sent.
type Thread struct {
	CPU  int
	Sent uint64
	Took time.Duration
}

// Rate is the thread's achieved rate (frames/s).
func (t Thread) Rate() float64 {
	if t.Took <= 0 {
		return 0
	}
	return float64(t.Sent) / t.Took.Seconds()
}

// SendThreads is Send on one thread per CPU of cpus (each pinned there, each sending pps /
// len(cpus)), all in the calling thread's network namespace; it returns what each sent. Each
// thread paces on its own CPU's count of the generator's per-CPU counter, so a thread that
// cannot be pinned is an error. The sequence numbers the program writes are per CPU, so the
// frames of two threads carry overlapping numbers: a receiver's reordering count is not
// meaningful for them (counts and rates are).
func (g *Generator) SendThreads(trial uint32, pps float64, d time.Duration, cpus []int) ([]Thread, error) {
	if len(cpus) == 0 || len(cpus) > runtime.NumCPU() {
		return nil, fmt.Errorf("send on threads: %d CPUs given, %d here", len(cpus), runtime.NumCPU())
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
	if err != nil {
		return nil, fmt.Errorf("send on threads: %w", err)
	}
	defer ns.Close()
	g.cfg.Trial = trial
	if err := setConfig(g.o, g.cfg); err != nil {
		return nil, err
	}
	out := make([]Thread, len(cpus))
	errs := make([]error, len(cpus))
	var wg sync.WaitGroup
	for i, cpu := range cpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // not unlocked: the thread ends with the goroutine
			if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
				errs[i] = fmt.Errorf("enter the sender's namespace: %w", err)
				return
			}
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				errs[i] = fmt.Errorf("pin sending thread to CPU %d: %w", cpu, err)
				return
			}
			sent, took, err := g.pace(pps/float64(len(cpus)), d, func() (uint64, error) { return g.sentOn(cpu) })
			out[i], errs[i] = Thread{CPU: cpu, Sent: sent, Took: took}, err
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// sentOn is the generator's count on one CPU.
func (g *Generator) sentOn(cpu int) (uint64, error) {
	var per []uint64
	if err := g.o.Sent.Lookup(uint32(0), &per); err != nil {
		return 0, fmt.Errorf("read generator count: %w", err)
	}
	if cpu < 0 || cpu >= len(per) {
		return 0, fmt.Errorf("read generator count: no CPU %d (%d)", cpu, len(per))
	}
	return per[cpu], nil
}
