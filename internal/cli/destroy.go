package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
	"github.com/spf13/cobra"
)

func newDestroy() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "destroy FILE|LAB | --all",
		Short: "Remove everything a lab created (idempotent; --all: every lab, even after a crash)",
		Args: func(cmd *cobra.Command, args []string) error {
			if all && len(args) > 0 {
				return errors.New("give a lab or --all, not both")
			}
			if !all && len(args) != 1 {
				return errors.New("give a lab name or file, or --all")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			d := newDeployer(cmd.ErrOrStderr())
			d.Log = func(f string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), f+"\n", a...) }
			out := cmd.OutOrStdout()
			if all {
				labs, err := d.DestroyAll(cmd.Context())
				for _, l := range labs {
					fmt.Fprintf(out, "destroyed lab %s\n", l)
				}
				if err == nil && len(labs) == 0 {
					fmt.Fprintln(out, "no labs to destroy")
				}
				return err
			}
			lab, err := labName(args[0])
			if err != nil {
				return err
			}
			err = d.Destroy(cmd.Context(), lab)
			if errors.Is(err, journal.ErrNotDeployed) {
				fmt.Fprintf(out, "lab %s is not deployed; nothing to destroy\n", lab)
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "destroyed lab %s\n", lab)
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "destroy every lab sfclab has deployed")
	return cmd
}

// labName takes a lab name, or a lab file whose name: it reads.
func labName(arg string) (string, error) {
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		lab, err := spec.Load(arg, kinds.Spec())
		if err != nil {
			return "", err
		}
		return lab.Name, nil
	}
	return arg, nil
}
