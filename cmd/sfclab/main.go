// Command sfclab builds service function chains from a lab file on this host, steers traffic
// through them, measures what they cost and removes every trace again.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sfclab/sfclab/internal/cli"
	"github.com/sfclab/sfclab/runtime/vm"
)

func main() {
	vm.GuestMain() // returns unless this binary is a VM guest's init or agent
	// Descriptors sfclab inherited (a caller's lock file, say) must not live on in the daemons
	// it leaves running in a lab (HAProxy, Squid, sfclab lb): mark every one above stderr
	// close-on-exec. Go's own descriptors are close-on-exec already.
	// Equivalent to: close_range(3, ~0U, CLOSE_RANGE_CLOEXEC)
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
