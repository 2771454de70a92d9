package deploy

import (
	"context"
	"errors"
	goruntime "runtime"
	"sync"

	"github.com/sfclab/sfclab/plan"
)

// eachNode runs fn for every node, as many at once as the host has cores (per-node steps are
// system calls into separate namespaces: they do not contend); it stops starting new ones
// after the first error or when ctx is done, and returns every error.
func eachNode(ctx context.Context, nodes []*plan.Node, fn func(n *plan.Node) error) error {
	workers := min(goruntime.NumCPU(), len(nodes))
	if workers <= 1 {
		for _, n := range nodes {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(n); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		mu   sync.Mutex
		errs []error
		next int
		wg   sync.WaitGroup
	)
	take := func() *plan.Node {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) > 0 || next == len(nodes) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			return nil
		}
		next++
		return nodes[next-1]
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := take(); n != nil; n = take() {
				if err := fn(n); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
