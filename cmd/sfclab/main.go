// Command sfclab builds service function chains from a lab file on this host, steers traffic
// through them, measures what they cost and removes every trace again.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sfclab/sfclab/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
