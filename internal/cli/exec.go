package cli

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"github.com/sfclab/sfclab/deploy"
	"github.com/spf13/cobra"
)

func newExec() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exec LAB NODE -- CMD [ARG...]",
		Short: "Run a command inside a node (its namespace and cgroup); its exit code is passed through",
		Args:  cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := deploy.CheckRoot(); err != nil {
				return err
			}
			d := newDeployer(cmd.ErrOrStderr())
			p, err := d.ReadPlan(args[0])
			if err != nil {
				return err
			}
			node, err := d.Node(p, args[1])
			if err != nil {
				return err
			}
			argv := args[2:]
			if argv[0] == "--" {
				argv = argv[1:]
			}
			if len(argv) == 0 {
				return errors.New("give a command after --")
			}
			c := exec.CommandContext(cmd.Context(), argv[0], argv[1:]...)
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			err = node.Run(c)
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code := ee.ExitCode()
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code = 128 + int(ws.Signal())
				}
				return &exitError{code: code}
			}
			var coded interface{ ExitCode() int }
			if errors.As(err, &coded) {
				return &exitError{code: coded.ExitCode()}
			}
			return err
		},
	}
	cmd.Flags().SetInterspersed(false)
	return cmd
}
