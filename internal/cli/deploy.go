package cli

import (
	"fmt"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/spf13/cobra"
)

func newDeploy() *cobra.Command {
	var dryRun bool
	var format, runtime, attach string
	cmd := &cobra.Command{
		Use:   "deploy FILE",
		Short: "Build the lab a file describes (--dry-run: print the plan, touch nothing)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := loadPlan(args[0], runtime, attach)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if dryRun {
				if format == "json" {
					return p.WriteJSON(out)
				}
				return p.WriteText(out)
			}
			d := deploy.New()
			d.Log = func(f string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), f+"\n", a...) }
			t, err := d.Deploy(cmd.Context(), p, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "deployed lab %s: %d nodes, %d segments, %d chains in %s\n", p.Lab, len(p.Nodes), len(p.Segments), len(p.Chains), t)
			for _, c := range p.Chains {
				target := c.Target.String()
				if c.Port != 0 {
					target = fmt.Sprintf("%s:%d", c.Target, c.Port)
				}
				fmt.Fprintf(out, "  chain %s: send from %s to %s\n", c.Name, c.From, target)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the resolved plan and create nothing")
	cmd.Flags().StringVarP(&format, "output", "o", "text", "plan format with --dry-run: text or json")
	cmd.Flags().StringVar(&runtime, "runtime", "", "deploy on this runtime instead of the file's (netns, docker)")
	cmd.Flags().StringVar(&attach, "attach", "", "docker attachment instead of the file's (routed, nat)")
	return cmd
}

// loadPlan reads, validates and resolves a lab file, on another runtime or docker attachment
// when given.
func loadPlan(path, runtime, attach string) (*plan.Plan, error) {
	lab, err := spec.Load(path)
	if err != nil {
		return nil, err
	}
	if err := experiment.Override(lab, runtime, attach); err != nil {
		return nil, err
	}
	return plan.Build(lab)
}
