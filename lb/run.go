package lb

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/sfclab/sfclab/proc"
)

// Main runs the balancer of a configuration file until SIGTERM or SIGINT, then drains it.
// It prints "ready" on standard error once it accepts connections. It leads its own process
// group (in a container `docker exec` starts it inside another one), which sfclab stops.
//
// Equivalent to: sfclab lb --config FILE
func Main(ctx context.Context, configPath string) error {
	proc.LeadGroup()
	cfg, err := ReadConfig(configPath)
	if err != nil {
		return err
	}
	if cfg.Threads > 0 {
		runtime.GOMAXPROCS(cfg.Threads)
	}
	s, err := Listen(*cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	fmt.Fprintf(os.Stderr, "sfclab lb: pid %d accepting on %s, balance %s over %d backends\n",
		os.Getpid(), s.Addr(), cfg.Balance, len(cfg.Backends))
	err = s.Serve(ctx)
	fmt.Fprintf(os.Stderr, "sfclab lb: pid %d stopped after draining\n", os.Getpid())
	return err
}
