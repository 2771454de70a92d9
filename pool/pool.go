// Package pool runs a bounded number of functions at once: the one worker pool of sfclab
// (namespaces created and deleted, containers asked for, nodes opened), so every caller gets
// the same rules on errors and cancellation.
package pool

import (
	"context"
	"errors"
	"sync"
)

// Run calls fn(0..n-1) with at most workers calls at once (at least one). It stops starting
// new calls after the first error or once ctx is done (ctx's error is then one of those
// returned), waits for the calls under way and returns every error, joined.
func Run(ctx context.Context, n, workers int, fn func(i int) error) error {
	return run(ctx, n, workers, true, fn)
}

// All calls fn(0..n-1) with at most workers calls at once (at least one), all of them
// whatever fails, and returns every error, joined.
func All(n, workers int, fn func(i int) error) error {
	return run(context.Background(), n, workers, false, fn)
}

func run(ctx context.Context, n, workers int, stop bool, fn func(i int) error) error {
	var (
		mu   sync.Mutex
		errs []error
		next int
		wg   sync.WaitGroup
	)
	take := func() int {
		mu.Lock()
		defer mu.Unlock()
		if next == n || (stop && len(errs) > 0) {
			return -1
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			return -1
		}
		next++
		return next - 1
	}
	for range min(max(workers, 1), n) {
		wg.Go(func() {
			for i := take(); i >= 0; i = take() {
				if err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
