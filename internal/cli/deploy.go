package cli

import (
	"fmt"
	"strings"

	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
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
			lab, err := loadLab(args[0], runtime, attach)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if dryRun {
				p, err := plan.Build(lab)
				if err != nil {
					return err
				}
				if format == "json" {
					return p.WriteJSON(out)
				}
				return p.WriteText(out)
			}
			d := newDeployer(cmd.ErrOrStderr())
			d.Log = func(f string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), f+"\n", a...) }
			// On docker, subnets are allocated around those other labs hold, under a host-wide
			// lock kept until this lab's networks exist.
			p, release, err := d.Plan(cmd.Context(), lab)
			if err != nil {
				return err
			}
			t, err := d.Deploy(cmd.Context(), p, args[0])
			release()
			if err != nil {
				return err
			}
			if tp := p.Transparent; tp != nil {
				fmt.Fprintf(out, "deployed lab %s (transparent): %d nodes on %d hosts, %d networks, %d port chains in %s\n",
					p.Lab, len(tp.Nodes), len(tp.Hosts), len(tp.Networks), len(tp.Model.PortChains), t)
				for _, c := range tp.Model.PortChains {
					fmt.Fprintf(out, "  port chain %s: classifiers %s through %s\n", c.Name,
						strings.Join(c.FlowClassifiers, ", "), strings.Join(c.PortPairGroups, " -> "))
				}
				return nil
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
	cmd.Flags().StringVar(&runtime, "runtime", "", "deploy on this runtime instead of the file's (netns, docker, kubernetes, vm)")
	cmd.Flags().StringVar(&attach, "attach", "", "docker attachment instead of the file's (routed, nat)")
	return cmd
}

// loadLab reads and validates a lab file, on another runtime or docker attachment when given.
func loadLab(path, runtime, attach string) (*spec.Lab, error) {
	lab, err := spec.Load(path, kinds.Spec())
	if err != nil {
		return nil, err
	}
	if err := experiment.Override(lab, runtime, attach); err != nil {
		return nil, err
	}
	return lab, nil
}
