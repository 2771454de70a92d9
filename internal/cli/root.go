// Package cli is sfclab's command line: one file per subcommand, each a thin layer over the
// library packages (spec, plan, deploy, ...).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/runtime/runtimes"
	"github.com/spf13/cobra"
)

// Version is sfclab's version, set at build time with -ldflags "-X ...cli.Version=...".
var Version = "dev"

// exitError carries an exit code that is not 1 (e.g. from `sfclab exec`).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Main runs the command line and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	fmt.Fprintf(stderr, "sfclab: %v\n", err)
	return 1
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "sfclab",
		Short: "Build service function chains on this host and measure what they cost",
		Long: `sfclab turns a service function chain written as a YAML lab file into network namespaces,
veths, bridges and real network functions (nftables/iptables firewalls, NAT, HAProxy or nft
load balancers, any command), steers traffic through them and removes every trace again.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion(),
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// The kubernetes runtime reads $KUBECONFIG (as kubectl does); the flag sets it for this run.
	kubeconfig := root.PersistentFlags().String("kubeconfig", "", "kubeconfig of the kubernetes runtime (default $KUBECONFIG, then ~/.kube/config)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if *kubeconfig != "" {
			return os.Setenv("KUBECONFIG", *kubeconfig)
		}
		return nil
	}
	root.AddCommand(newAgent(), newDeploy(), newDestroy(), newInspect(), newExec(), newBench(), newReport(),
		newReproduce(), newImages(), newExport(), newVersion(), newLB(), newServe(), newChain(), newMetrics(), newTop())
	return root
}

// newDeployer returns a Deployer on the default journal with the registered runtimes; a docker
// deploy builds the node image when it is missing, with a progress display on w, and what a
// runtime did beside the lab (a kubernetes deploy's sweep of destroyed labs; a guest image's
// build and the superseded images it removed) is told on w.
func newDeployer(w io.Writer) *deploy.Deployer {
	d := deploy.New()
	logf := func(f string, a ...any) { fmt.Fprintf(w, f+"\n", a...) }
	d.Runtimes = runtimes.All(runtimes.Options{StateRoot: d.Journal.Root, ImageProgress: imageProgress(w),
		Log: logf, VMLog: logf})
	return d
}
