package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/vm"
)

// The vm runtime's guest images, under `sfclab images ... --runtime vm`.

// vmImageSets are the program sets of the guest images a lab file's VMs boot (one per group
// of VM nodes that need the same programs); no lab file, or a lab without VMs: the image with
// the base programs only.
func vmImageSets(labFile string) ([]vm.ProgramSet, error) {
	if labFile == "" {
		return []vm.ProgramSet{{}}, nil
	}
	lab, err := loadLab(labFile, "", "")
	if err != nil {
		return nil, err
	}
	p, err := plan.Build(lab)
	if err != nil {
		return nil, err
	}
	sets, err := vm.ProgramSets(p)
	if err != nil || len(sets) > 0 {
		return sets, err
	}
	return []vm.ProgramSet{{}}, nil
}

func buildVMImage(cmd *cobra.Command, labFile string) error {
	if err := deploy.CheckRoot(); err != nil {
		return err
	}
	sets, err := vmImageSets(labFile)
	if err != nil {
		return err
	}
	b := vm.Builder{Log: func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }}
	for _, set := range sets {
		start := time.Now()
		im, err := b.Ensure(set.Programs)
		if err != nil {
			return err
		}
		nodes := ""
		if len(set.Nodes) > 0 {
			nodes = ", for " + strings.Join(set.Nodes, " ")
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s (kernel %s, initramfs %d MB%s, %s)\n", im.Dir, im.Kernel, im.Bytes>>20, nodes, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func listVMImages(cmd *cobra.Command) error {
	ims, err := vm.Builder{}.List()
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if len(ims) == 0 {
		fmt.Fprintln(out, "no guest image; deploys of VM nodes build one (or: sfclab images build --runtime vm)")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tKERNEL\tCREATED\tINITRAMFS\tPROGRAMS")
	for _, im := range ims {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d MB\t%s\n", im.Key, im.Kernel, im.Created.Format(time.DateTime), im.Bytes>>20, strings.Join(im.Programs, " "))
	}
	return tw.Flush()
}

func removeVMImages(cmd *cobra.Command, keys []string, all bool) error {
	if all {
		keys = []string{"all"}
	}
	if len(keys) == 0 {
		return fmt.Errorf("name the images to remove (sfclab images list --runtime vm) or give --all")
	}
	for _, k := range keys {
		if err := (vm.Builder{}).Remove(k); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", k)
	}
	return nil
}
