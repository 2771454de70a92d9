package lb

import (
	"os"
	"runtime"
	"testing"
)

// TestIdlePipesAreBounded: pipes released empty are kept for reuse up to a bound and the rest
// are closed; none is dropped open (a sync.Pool dropped them at GC, leaking descriptors).
func TestIdlePipesAreBounded(t *testing.T) {
	count := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("no /proc/self/fd: %v", err)
		}
		return len(ents)
	}
	for len(pipes) > 0 {
		p := <-pipes
		p.release(false)
	}
	before := count()
	const n = maxIdleSharedPipes + 100
	ps := make([]*pipe, 0, n)
	for range n {
		p, err := getPipe(0)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		p.release(true)
	}
	runtime.GC()
	runtime.GC()
	if got, want := count()-before, 2*maxIdleSharedPipes; got != want {
		t.Errorf("%d descriptors open after releasing %d empty pipes and two GCs, want %d (the idle bound, 2 each)", got, n, want)
	}
	if len(pipes) != maxIdleSharedPipes {
		t.Errorf("%d idle pipes kept, want %d", len(pipes), maxIdleSharedPipes)
	}
	for len(pipes) > 0 {
		p := <-pipes
		p.release(false)
	}
	if got := count() - before; got != 0 {
		t.Errorf("%d descriptors left after closing the idle pipes", got)
	}
}
