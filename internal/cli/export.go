package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/docker"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

func newExport() *cobra.Command {
	var format, output string
	cmd := &cobra.Command{
		Use:   "export --format compose FILE",
		Short: "Write a lab as a file plain tools bring up (compose: docker-compose up -d)",
		Long: `export writes the lab as a docker-compose file (format 2.4, for docker-compose v1 and
docker compose v2): one service per node with the plan's image, addresses and sysctls, and a
generated shell script that adds the plan's routes and policy rules and loads each function's
rules or HAProxy configuration; one network per segment with the plan's subnet and gateway.
The lab runs as its docker runtime would lay it out, whatever runtime the file names.
An l4lb with impl: sfclab runs this sfclab executable, bind-mounted read-only into its
container, with its configuration written beside the compose file (LAB.NODE.lb.json): such a
lab needs -o FILE.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "compose" {
				return fmt.Errorf("export format %q: only compose is supported", format)
			}
			lab, err := spec.Load(args[0], kinds.Spec())
			if err != nil {
				return err
			}
			lab.Runtime = spec.RuntimeDocker
			p, err := plan.Build(lab)
			if err != nil {
				return err
			}
			for _, g := range docker.ComposeGaps(p) {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", g)
			}
			if output == "" || output == "-" {
				return docker.Compose(cmd.OutOrStdout(), p)
			}
			e, err := docker.ComposeExport(p, docker.ComposeOptions{})
			if err != nil {
				return err
			}
			if err := e.Write(output); err != nil {
				return err
			}
			for _, f := range e.Files {
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", filepath.Join(filepath.Dir(output), f.Name))
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: docker-compose -p %s -f %s up -d\n", output, p.Lab, output)
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "compose", "output format: compose")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	return cmd
}
